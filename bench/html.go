package bench

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"strings"
)

// The charts are hand-written SVG (see the package doc). Each is an
// <svg class="chart">; a short inline script marks every chart whose
// layout box is non-empty with data-rendered="yes", so a headless browser's
// DOM dump shows that the charts rendered.

const (
	chartW, chartH         = 700.0, 260.0
	padL, padR, padT, padB = 48.0, 165.0, 28.0, 36.0
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

type svg struct {
	b      strings.Builder
	title  string
	x0, x1 float64
	y0, y1 float64
	logX   bool
	labels []labelBox // threshold labels placed so far
}

// labelBox is where a threshold label sits: a row below the top of the
// plot and the horizontal extent of its text.
type labelBox struct {
	row    int
	x0, x1 float64
}

// Label metrics: a 10 px label is drawn at most labelCharW wide per
// character (an over-estimate for the usual sans-serif faces), rows of
// labels labelRowH apart.
const (
	labelFont  = 10.0
	labelCharW = 6.5
	labelRowH  = 12.0
)

// placeLabel places the label of a threshold drawn at x: left of the line
// (right-aligned), or right of it where the left has no room, on the first
// row where it overlaps no earlier label. It records the label and
// returns the text's x, anchor and baseline.
func (s *svg) placeLabel(x float64, text string) (tx float64, anchor string, y float64) {
	w := float64(len([]rune(text))) * labelCharW
	tx, anchor = x-2, "end"
	b := labelBox{x0: tx - w - 2, x1: tx + 2}
	if b.x0 < padL {
		tx, anchor = x+2, "start"
		b = labelBox{x0: tx - 2, x1: tx + w + 2}
	}
	for row := 0; ; row++ {
		free := true
		for _, l := range s.labels {
			if l.row == row && l.x0 < b.x1 && b.x0 < l.x1 {
				free = false
				break
			}
		}
		if free {
			b.row = row
			s.labels = append(s.labels, b)
			return tx, anchor, padT + labelFont + float64(row)*labelRowH
		}
	}
}

func newSVG(name, title string, x0, x1, y0, y1 float64, logX bool) *svg {
	s := &svg{title: title, x0: x0, x1: x1, y0: y0, y1: y1, logX: logX}
	fmt.Fprintf(&s.b, `<svg class="chart" data-chart="%s" xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g" role="img">`,
		html.EscapeString(name), chartW, chartH, chartW, chartH)
	fmt.Fprintf(&s.b, `<title>%s</title><rect x="0" y="0" width="%g" height="%g" fill="#fff"/>`, html.EscapeString(title), chartW, chartH)
	fmt.Fprintf(&s.b, `<text x="%g" y="18" font-size="13" font-weight="bold">%s</text>`, padL, html.EscapeString(title))
	fmt.Fprintf(&s.b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#ccc"/>`, chartW-padR, padT, chartW-padR, chartH-padB)
	return s
}

func (s *svg) px(x float64) float64 {
	if s.logX {
		x, s0, s1 := math.Log10(math.Max(x, 1)), math.Log10(s.x0), math.Log10(s.x1)
		return padL + (x-s0)/(s1-s0)*(chartW-padL-padR)
	}
	return padL + (x-s.x0)/(s.x1-s.x0)*(chartW-padL-padR)
}

func (s *svg) py(y float64) float64 {
	return chartH - padB - (y-s.y0)/(s.y1-s.y0)*(chartH-padT-padB)
}

func (s *svg) axes(xlabel, ylabel string, xticks []float64, xfmt func(float64) string, yticks []float64) {
	fmt.Fprintf(&s.b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#333"/>`, padL, s.py(s.y0), chartW-padR, s.py(s.y0))
	fmt.Fprintf(&s.b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#333"/>`, padL, s.py(s.y0), padL, padT)
	for _, t := range xticks {
		x := s.px(t)
		fmt.Fprintf(&s.b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#333"/><text x="%.1f" y="%g" font-size="10" text-anchor="middle">%s</text>`,
			x, s.py(s.y0), x, s.py(s.y0)+4, x, s.py(s.y0)+15, html.EscapeString(xfmt(t)))
	}
	for _, t := range yticks {
		y := s.py(t)
		fmt.Fprintf(&s.b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#eee"/><text x="%g" y="%.1f" font-size="10" text-anchor="end">%g</text>`,
			padL, y, chartW-padR, y, padL-4, y+3, t)
	}
	fmt.Fprintf(&s.b, `<text x="%g" y="%g" font-size="11" text-anchor="middle">%s</text>`, (padL+chartW-padR)/2, chartH-4, html.EscapeString(xlabel))
	fmt.Fprintf(&s.b, `<text x="12" y="%g" font-size="11" text-anchor="middle" transform="rotate(-90 12 %g)">%s</text>`, (padT+chartH-padB)/2, (padT+chartH-padB)/2, html.EscapeString(ylabel))
}

// vline draws a threshold and its label, the label on the first row where
// it overlaps no other threshold's label (two thresholds at one value get
// a label each, one under the other).
func (s *svg) vline(x float64, color, label string) {
	if x < s.x0 || x > s.x1 {
		return
	}
	tx, anchor, y := s.placeLabel(s.px(x), label)
	fmt.Fprintf(&s.b, `<line class="threshold" x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="%s" stroke-dasharray="4 3" stroke-width="1.5"/><text class="threshold-label" x="%.1f" y="%g" font-size="%g" fill="%s" text-anchor="%s" stroke="#fff" stroke-width="3" paint-order="stroke">%s</text>`,
		s.px(x), padT, s.px(x), s.py(s.y0), color, tx, y, labelFont, color, anchor, html.EscapeString(label))
}

// empty writes why the chart has nothing to draw, in its middle, a line
// of text per line of why.
func (s *svg) empty(why string) {
	lines := strings.Split(why, "\n")
	x, y := (padL+chartW-padR)/2, (padT+chartH-padB)/2-float64(len(lines)-1)*8
	fmt.Fprintf(&s.b, `<text class="empty-reason" x="%g" y="%g" font-size="12" fill="#555" text-anchor="middle">`, x, y)
	for i, l := range lines {
		dy := 0.0
		if i > 0 {
			dy = 16
		}
		fmt.Fprintf(&s.b, `<tspan x="%g" dy="%g">%s</tspan>`, x, dy, html.EscapeString(l))
	}
	s.b.WriteString(`</text>`)
}

func (s *svg) polyline(xs, ys []float64, color, dash string) {
	s.polylineW(xs, ys, color, dash, 1.8, 1, "")
}

// polylineW draws a series of the given width and opacity; name, when
// set, becomes its data-series attribute.
func (s *svg) polylineW(xs, ys []float64, color, dash string, width, opacity float64, name string) {
	var pts strings.Builder
	for i := range xs {
		if math.IsNaN(ys[i]) {
			continue
		}
		fmt.Fprintf(&pts, "%.1f,%.1f ", s.px(xs[i]), s.py(ys[i]))
	}
	attr := ""
	if name != "" {
		attr = fmt.Sprintf(` data-series="%s"`, html.EscapeString(name))
	}
	fmt.Fprintf(&s.b, `<polyline class="series"%s points="%s" fill="none" stroke="%s" stroke-width="%g" stroke-opacity="%g" stroke-dasharray="%s" stroke-linejoin="round"/>`,
		attr, strings.TrimSpace(pts.String()), color, width, opacity, dash)
}

func (s *svg) legend(items []string, colors []string) {
	s.legendO(items, colors, nil)
}

// legendO is legend with a swatch opacity per item (nil: all opaque).
func (s *svg) legendO(items []string, colors []string, opacity []float64) {
	x := chartW - padR + 10
	for i, it := range items {
		y := padT + float64(i)*14
		o := 1.0
		if opacity != nil {
			o = opacity[i]
		}
		fmt.Fprintf(&s.b, `<rect x="%g" y="%g" width="10" height="8" fill="%s" fill-opacity="%g"/><text class="legend" x="%g" y="%g" font-size="10">%s</text>`, x, y, colors[i], o, x+14, y+8, html.EscapeString(it))
	}
}

func (s *svg) String() string { return s.b.String() + "</svg>" }

// histogramSVG draws one tool's similarity histograms with its thresholds.
func histogramSVG(h Histogram) string {
	lo := 1.0
	for _, v := range append(append([]float64{}, h.Duplicates...), h.Distinct...) {
		lo = math.Min(lo, v)
	}
	lo = math.Max(0, math.Min(math.Floor(lo*20)/20, math.Min(h.AmbiguousThreshold, 0.5)))
	const bins = 40
	width := (1.0001 - lo) / bins
	count := func(vs []float64) []int {
		c := make([]int, bins)
		for _, v := range vs {
			c[min(bins-1, max(0, int((v-lo)/width)))]++
		}
		return c
	}
	cd, cn := count(h.Duplicates), count(h.Distinct)
	top := 1
	for i := range bins {
		top = max(top, cd[i], cn[i])
	}
	s := newSVG("histogram:"+h.Tool, fmt.Sprintf("%s — nearest earlier call (%s)", h.Tool, h.Policy), lo, 1.0001, 0, float64(top), false)
	var xt []float64
	for t := math.Ceil(lo*10) / 10; t <= 1.0001; t += 0.1 {
		xt = append(xt, math.Round(t*10)/10)
	}
	s.axes("cosine similarity", "events", xt, func(v float64) string { return fmt.Sprintf("%.1f", v) }, niceTicks(float64(top)))
	bw := s.px(lo+width) - s.px(lo)
	for i := range bins {
		x := s.px(lo + float64(i)*width)
		if cn[i] > 0 {
			fmt.Fprintf(&s.b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.6"/>`, x, s.py(float64(cn[i])), bw/2, s.py(0)-s.py(float64(cn[i])), palette[1])
		}
		if cd[i] > 0 {
			fmt.Fprintf(&s.b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="0.8"/>`, x+bw/2, s.py(float64(cd[i])), bw/2, s.py(0)-s.py(float64(cd[i])), palette[2])
		}
	}
	s.vline(h.DuplicateThreshold, "#000", fmt.Sprintf("dup %.2f", h.DuplicateThreshold))
	s.vline(h.AmbiguousThreshold, "#888", fmt.Sprintf("amb %.2f", h.AmbiguousThreshold))
	s.legend([]string{fmt.Sprintf("true duplicates (%d)", len(h.Duplicates)), fmt.Sprintf("distinct (%d)", len(h.Distinct))}, []string{palette[2], palette[1]})
	return s.String()
}

func niceTicks(top float64) []float64 {
	step := math.Max(1, math.Pow(10, math.Floor(math.Log10(top))))
	if top/step < 3 {
		step /= 2
	}
	step = math.Max(1, math.Round(step))
	var out []float64
	for t := 0.0; t <= top; t += step {
		out = append(out, t)
	}
	return out
}

func val(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// prSVG draws precision and recall against the threshold.
func prSVG(sw Sweep, funnelT, baselineT float64) string {
	s := newSVG("precision-recall", "precision and recall against the threshold", 0.5, 1, 0, 1, false)
	s.axes("threshold (funnel: duplicate threshold; baseline: its cosine threshold)", "", []float64{0.5, 0.6, 0.7, 0.8, 0.9, 1}, func(v float64) string { return fmt.Sprintf("%.1f", v) }, []float64{0, 0.25, 0.5, 0.75, 1})
	series := func(prs []PR, f func(PR) *float64) []float64 {
		out := make([]float64, len(prs))
		for i, p := range prs {
			out[i] = val(f(p))
		}
		return out
	}
	prec := func(p PR) *float64 { return p.Precision }
	rec := func(p PR) *float64 { return p.Recall }
	defined := false
	for _, prs := range [][]PR{sw.Funnel, sw.Baseline} {
		for _, p := range prs {
			defined = defined || p.Precision != nil || p.Recall != nil
		}
	}
	if !defined {
		s.empty(emptyPR)
	} else {
		s.polyline(sw.Thresholds, series(sw.Funnel, prec), palette[0], "")
		s.polyline(sw.Thresholds, series(sw.Funnel, rec), palette[0], "5 3")
		s.polyline(sw.Thresholds, series(sw.Baseline, prec), palette[3], "")
		s.polyline(sw.Thresholds, series(sw.Baseline, rec), palette[3], "5 3")
	}
	s.vline(funnelT, palette[0], fmt.Sprintf("funnel %.2f", funnelT))
	s.vline(baselineT, palette[3], fmt.Sprintf("baseline %.2f", baselineT))
	s.legend([]string{"funnel precision", "funnel recall (dashed)", "baseline precision", "baseline recall (dashed)"}, []string{palette[0], palette[0], palette[3], palette[3]})
	return s.String()
}

// cdfSVG draws the latency CDF of each stage with the budget line.
func cdfSVG(lat map[string]Latency, budgetMS float64) string {
	hi := budgetMS * 1000 * 2
	for _, l := range lat {
		hi = math.Max(hi, float64(l.Max))
	}
	s := newSVG("latency-cdf", "latency CDF per stage", 1, hi, 0, 1, true)
	var xt []float64
	for t := 1.0; t <= hi; t *= 10 {
		xt = append(xt, t)
	}
	s.axes("µs (log scale)", "fraction of checks", xt, func(v float64) string {
		switch {
		case v >= 1000:
			return fmt.Sprintf("%gms", v/1000)
		default:
			return fmt.Sprintf("%gµs", v)
		}
	}, []float64{0, 0.25, 0.5, 0.75, 1})
	cdf := func(l Latency) (xs, ys []float64) {
		// From 0 at the fastest check, so that even one check draws a step.
		xs, ys = append(xs, math.Max(1, float64(l.Sorted[0]))), append(ys, 0)
		step := max(1, len(l.Sorted)/400)
		for j := 0; j < len(l.Sorted); j += step {
			xs = append(xs, math.Max(1, float64(l.Sorted[j])))
			ys = append(ys, float64(j+1)/float64(len(l.Sorted)))
		}
		return append(xs, math.Max(1, float64(l.Max))), append(ys, 1)
	}
	var names, colors []string
	var opacity []float64
	// The total first, as a wide pale band: the stage that dominates it
	// (embed, on free text) is drawn on top, inside the band, and both stay
	// visible where they coincide.
	if l := lat["total"]; l.N > 0 {
		xs, ys := cdf(l)
		s.polylineW(xs, ys, totalColor, "", 7, totalOpacity, "total")
		names, colors, opacity = append(names, fmt.Sprintf("total (n=%d), wide band", l.N)), append(colors, totalColor), append(opacity, totalOpacity)
	}
	i := 0
	for _, k := range sortedKeys(lat) {
		l := lat[k]
		if l.N == 0 || k == "total" {
			continue
		}
		color := palette[i%len(palette)]
		i++
		xs, ys := cdf(l)
		s.polylineW(xs, ys, color, "", 1.8, 1, k)
		names, colors, opacity = append(names, fmt.Sprintf("%s (n=%d)", k, l.N)), append(colors, color), append(opacity, 1)
	}
	if len(names) == 0 {
		s.empty("no latency to show: no check was timed")
	}
	s.vline(budgetMS*1000, "#000", fmt.Sprintf("budget %g ms", budgetMS))
	s.legendO(names, colors, opacity)
	return s.String()
}

// The total latency's band in the CDF.
const (
	totalColor   = "#000"
	totalOpacity = 0.22
)

var page = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>idem bench — {{.R.Set}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:8px 0 20px}td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left}h2{margin-top:28px}.charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{border:1px solid #ddd}
</style></head><body>
<h1>idem bench — {{.R.Set}}</h1>
<p>{{.R.Events}} events ({{.Labelled}}), {{.R.Mode}}, budget {{.R.BudgetMS}} ms. Baseline: one embedding of the whole canonical call, one cosine threshold ({{printf "%.2f" .R.Baseline.Threshold}}), no identity gate.</p>
<h2>Quality</h2>
<table><tr><th>slice</th><th>events</th><th>TP</th><th>FP</th><th>FN</th><th>TN</th><th>precision</th><th>recall</th><th>F1</th><th>hard-neg FP rate</th></tr>
{{range .Rows}}<tr><td>{{.Name}}</td><td>{{.M.Events}}</td><td>{{.M.TP}}</td><td>{{.M.FP}}</td><td>{{.M.FN}}</td><td>{{.M.TN}}</td><td>{{.P}}</td><td>{{.Rc}}</td><td>{{.F}}</td><td>{{.H}}</td></tr>
{{end}}</table>
<h2>Latency (µs)</h2>
<table><tr><th>stage</th><th>n</th><th>p50</th><th>p95</th><th>p99</th><th>max</th><th>over budget</th></tr>
{{range .Lat}}<tr><td>{{.Name}}</td><td>{{.L.N}}</td><td>{{.L.P50}}</td><td>{{.L.P95}}</td><td>{{.L.P99}}</td><td>{{.L.Max}}</td><td>{{.Over}}</td></tr>
{{end}}</table>
<h2>Charts</h2>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
<script>
// Marks each chart rendered (laid out with its shapes), empty (laid out,
// saying why it has nothing to draw) or no; counts the pairs of labels
// (thresholds, legend) drawn over each other.
let overlaps = 0;
const boxes = [];
for (const s of document.querySelectorAll('svg.chart')) {
  const b = s.getBoundingClientRect();
  const shapes = s.querySelectorAll('polyline.series, rect.bar').length;
  const why = s.querySelector('text.empty-reason');
  s.setAttribute('data-rendered', b.width > 0 && b.height > 0 ? (shapes > 0 ? 'yes' : why ? 'empty' : 'no') : 'no');
  const labels = [...s.querySelectorAll('text.threshold-label, text.legend')].map(t => t.getBoundingClientRect());
  for (let i = 0; i < labels.length; i++) {
    for (let j = i + 1; j < labels.length; j++) {
      const a = labels[i], c = labels[j];
      if (a.left < c.right && c.left < a.right && a.top < c.bottom && c.top < a.bottom) overlaps++;
    }
  }
  boxes.push(...[...s.querySelectorAll('text.threshold-label')].map(t => { const r = t.getBoundingClientRect(); return [t.textContent, Math.round(r.left), Math.round(r.top), Math.round(r.right), Math.round(r.bottom)].join(' '); }));
}
document.body.setAttribute('data-charts-rendered', document.querySelectorAll('svg.chart[data-rendered="yes"]').length);
document.body.setAttribute('data-label-overlaps', overlaps);
document.body.setAttribute('data-threshold-labels', boxes.join('; '));
</script>
</body></html>
`))

type htmlRow struct {
	Name        string
	M           Metrics
	P, Rc, F, H string
}

type latRow struct {
	Name string
	L    Latency
	Over string
}

// Why a chart is empty, as it says.
const (
	emptyPR         = "no precision or recall to draw:\nthe set has no labelled duplicates, or no labels"
	emptyUnlabelled = "no histogram: the set carries no labels (truth),\nso duplicates and distinct calls cannot be told apart"
	emptyNoPairs    = "no histogram: no labelled event had an earlier call\nof its tool in its session to compare with"
)

// emptyHistogramSVG stands for the histograms when there is none.
func emptyHistogramSVG(why string) string {
	s := newSVG("histogram", "nearest earlier call — similarity histogram", 0, 1, 0, 1, false)
	s.axes("cosine similarity", "events", []float64{0, 0.5, 1}, func(v float64) string { return fmt.Sprintf("%.1f", v) }, nil)
	s.empty(why)
	return s.String()
}

// maxHistograms bounds the per-tool histograms drawn.
const maxHistograms = 12

// WriteHTML writes the self-contained report.html.
func (r *Report) WriteHTML(w io.Writer) error {
	var rows []htmlRow
	add := func(name string, m Metrics) {
		h := "–"
		if m.HardNeg > 0 {
			h = fmt.Sprintf("%s (%d/%d)", pct(m.HardNegFPRate), m.HardNegFP, m.HardNeg)
		}
		rows = append(rows, htmlRow{name, m, pct(m.Precision), pct(m.Recall), pct(m.F1), h})
	}
	add("funnel overall", r.Overall)
	add("baseline overall", r.Baseline.Overall)
	if m, ok := r.ByTag["write"]; ok {
		add("funnel write", m)
		add("baseline write", r.Baseline.ByTag["write"])
	}
	for _, k := range sortedKeys(r.ByStage) {
		add("stage "+k, r.ByStage[k])
	}
	for _, k := range sortedKeys(r.ByPolicy) {
		add("action type "+k, r.ByPolicy[k])
	}
	for _, k := range sortedKeys(r.ByTag) {
		add("tag "+k, r.ByTag[k])
	}
	for _, k := range sortedKeys(r.ByTool) {
		add("tool "+k, r.ByTool[k])
	}
	var lat []latRow
	for _, k := range sortedKeys(r.Latency) {
		l := r.Latency[k]
		over := ""
		if k == "total" {
			over = fmt.Sprint(l.OverBudget)
		}
		lat = append(lat, latRow{k, l, over})
	}
	ft := 0.9
	for _, p := range r.Policies {
		if p.Semantic {
			ft = p.DuplicateThreshold
			break
		}
	}
	charts := []template.HTML{
		template.HTML(prSVG(r.Sweep, ft, r.Baseline.Threshold)),
		template.HTML(cdfSVG(r.Latency, r.BudgetMS)),
	}
	for i, h := range r.Histograms {
		if i == maxHistograms {
			break
		}
		charts = append(charts, template.HTML(histogramSVG(h)))
	}
	if len(r.Histograms) == 0 {
		why := emptyNoPairs
		if !r.Labelled {
			why = emptyUnlabelled
		}
		charts = append(charts, template.HTML(emptyHistogramSVG(why)))
	}
	return page.Execute(w, map[string]any{"R": r, "Labelled": labelled(r), "Rows": rows, "Lat": lat, "Charts": charts})
}
