package bench

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	stsbOnce   sync.Once
	stsbReport *Report
)

// stsbDevSmall is the report of testdata/stsb-dev-small, replayed once for
// all the report tests (they only read it).
func stsbDevSmall(t *testing.T) *Report {
	t.Helper()
	stsbOnce.Do(func() { stsbReport = runSet(t, "testdata/stsb-dev-small", DefaultConfig()) })
	if stsbReport == nil {
		t.Fatal("the replay of testdata/stsb-dev-small failed (see the first test that ran it)")
	}
	return stsbReport
}

// TestReportHTMLStatic checks the report's structure without a browser:
// self-contained (no external resource), one chart per kind, thresholds
// and the budget line drawn.
func TestReportHTMLStatic(t *testing.T) {
	r := stsbDevSmall(t)
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"http://", "https://", "<script src", "<link"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("report.html contains %q: it must be self-contained", bad)
		}
	}
	for _, want := range []string{`data-chart="precision-recall"`, `data-chart="latency-cdf"`, `data-chart="histogram:add_issue_comment"`,
		`class="threshold"`, "budget 50 ms", "dup 0.90", "funnel write", "baseline write"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// thresholdLabel matches a threshold's label: x, y, anchor, text.
var thresholdLabel = regexp.MustCompile(`<text class="threshold-label" x="([-\d.]+)" y="([-\d.]+)" font-size="[\d.]+" fill="[^"]*" text-anchor="(start|end)"[^>]*>([^<]*)</text>`)

// TestReportHTMLLayout checks where the report places what used to hide
// behind something else: threshold labels at nearby or equal values (dup
// 0.90 / amb 0.85 in a histogram; funnel 0.90 / baseline 0.90 in the
// precision-recall chart) get rows or sides of their own, and the total
// latency is drawn first, as a wide band under the stage curves (embed
// dominates it on free text and would hide a thin total line).
func TestReportHTMLLayout(t *testing.T) {
	r := stsbDevSmall(t)
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	charts := strings.Split(b.String(), `<svg class="chart"`)[1:]
	if len(charts) < 3 {
		t.Fatalf("%d charts", len(charts))
	}
	pairs := 0
	for _, c := range charts {
		name := c[strings.Index(c, `data-chart="`)+12:]
		name = name[:strings.IndexByte(name, '"')]
		type box struct {
			text           string
			x0, x1, y0, y1 float64
		}
		var boxes []box
		for _, m := range thresholdLabel.FindAllStringSubmatch(c, -1) {
			x, _ := strconv.ParseFloat(m[1], 64)
			y, _ := strconv.ParseFloat(m[2], 64)
			w := float64(len([]rune(m[4]))) * labelCharW
			bx := box{m[4], x - w, x, y - labelFont, y}
			if m[3] == "start" {
				bx.x0, bx.x1 = x, x+w
			}
			if bx.x0 < 0 || bx.x1 > chartW {
				t.Errorf("%s: label %q runs off the chart (%.0f to %.0f)", name, m[4], bx.x0, bx.x1)
			}
			for _, o := range boxes {
				pairs++
				if bx.x0 < o.x1 && o.x0 < bx.x1 && bx.y0 < o.y1 && o.y0 < bx.y1 {
					t.Errorf("%s: labels %q and %q overlap", name, bx.text, o.text)
				}
			}
			boxes = append(boxes, bx)
		}
	}
	if pairs == 0 {
		t.Errorf("no chart has two threshold labels: the test checks nothing")
	}
	cdf := charts[1]
	if !strings.Contains(cdf, `data-chart="latency-cdf"`) {
		t.Fatalf("the second chart is not the latency CDF")
	}
	first := regexp.MustCompile(`<polyline class="series" data-series="([^"]+)" points="[^"]*" fill="none" stroke="[^"]*" stroke-width="([\d.]+)"`).FindAllStringSubmatch(cdf, -1)
	if len(first) < 2 || first[0][1] != "total" {
		t.Fatalf("the CDF's first series is %v, want total under the others", first)
	}
	tw, _ := strconv.ParseFloat(first[0][2], 64)
	for _, m := range first[1:] {
		if w, _ := strconv.ParseFloat(m[2], 64); w >= tw/2 {
			t.Errorf("stage %s is %g wide, the total band %g: the band would not show around it", m[1], w, tw)
		}
	}
}

// TestReportHTMLEmptyCharts: a chart with nothing to draw says why.
func TestReportHTMLEmptyCharts(t *testing.T) {
	for _, tc := range []struct {
		name, lines string
		want        []string
	}{
		{"no pairs", `{"t_ms": 0, "session": "s1", "workflow": "w", "step": "1", "tool": "pay", "arguments": {"to": "acct-1", "amount": 5}, "truth": {"expect": "execute"}}
{"t_ms": 10, "session": "s2", "workflow": "w", "step": "2", "tool": "refund", "arguments": {"order": "o-1"}, "truth": {"expect": "execute"}}
`, []string{emptyNoPairs, emptyPR}},
		{"unlabelled", `{"t_ms": 0, "session": "s1", "workflow": "w", "step": "1", "tool": "pay", "arguments": {"to": "acct-1", "amount": 5}}
{"t_ms": 10, "session": "s1", "workflow": "w", "step": "2", "tool": "pay", "arguments": {"to": "acct-1", "amount": 5}}
`, []string{emptyUnlabelled, emptyPR}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "traffic.jsonl"), []byte(tc.lines), 0o644); err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := runSet(t, dir, testConfig()).WriteHTML(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				for _, line := range strings.Split(w, "\n") {
					if !strings.Contains(b.String(), `<text class="empty-reason"`) || !strings.Contains(b.String(), ">"+html.EscapeString(line)+"</tspan>") {
						t.Errorf("report.html does not say %q", line)
					}
				}
			}
		})
	}
}

// TestReportHTMLChromium opens report.html in headless Chromium and checks
// from the DOM it dumps that every chart was laid out with its shapes, or
// says why it has none (the page's inline script marks each chart), and
// that no two labels are drawn over each other, as laid out by the
// browser's own fonts.
func TestReportHTMLChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH (Debian: apt-get install -y chromium); skipping the browser check of report.html")
	}
	r := stsbDevSmall(t)
	dom := dumpDOM(t, bin, r)
	charts := strings.Count(string(dom), `class="chart"`)
	if charts < 3 {
		t.Fatalf("the DOM holds %d charts, want at least 3", charts)
	}
	m := regexp.MustCompile(`data-charts-rendered="(\d+)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's script did not run: no data-charts-rendered in the DOM")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != charts {
		t.Errorf("%d of %d charts rendered", n, charts)
	}
	if strings.Contains(string(dom), `data-rendered="no"`) {
		t.Errorf("a chart rendered empty")
	}
	labels := regexp.MustCompile(`data-threshold-labels="([^"]*)"`).FindSubmatch(dom)
	if labels == nil || strings.Count(string(labels[1]), ";") < 3 {
		t.Fatalf("the DOM lists threshold labels %q: want at least four", labels)
	}
	if !bytes.Contains(dom, []byte(`data-label-overlaps="0"`)) {
		t.Errorf("labels overlap in the browser; threshold labels (text left top right bottom): %s", labels[1])
	}

	// A set without pairs: the histogram is laid out empty, saying why.
	dir := t.TempDir()
	lines := `{"t_ms": 0, "session": "s1", "workflow": "w", "step": "1", "tool": "pay", "arguments": {"to": "acct-1", "amount": 5}, "truth": {"expect": "execute"}}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "traffic.jsonl"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	dom = dumpDOM(t, bin, runSet(t, dir, testConfig()))
	if strings.Contains(string(dom), `data-rendered="no"`) || !strings.Contains(string(dom), `data-chart="histogram" xmlns="http://www.w3.org/2000/svg" width="700" height="260" viewBox="0 0 700 260" role="img" data-rendered="empty"`) {
		t.Errorf("the empty histogram is not marked as laid out empty:\n%s", dom)
	}
}

// dumpDOM writes r's report.html and returns the DOM headless Chromium
// makes of it, after the page's script ran.
func dumpDOM(t *testing.T, bin string, r *Report) []byte {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Headless Chromium now and then never exits on a loaded machine (seen
	// once in 90 s beside two CPU burners, where it takes 7 s otherwise):
	// a hang is tried again with a fresh profile, any other failure fails.
	const attempts = 3
	for i := 1; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
			"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+filepath.Join(dir, fmt.Sprintf("profile-%d", i)),
			"--dump-dom", "file://"+path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		dom, err := cmd.Output()
		hung := ctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			return dom
		case hung && i < attempts:
			t.Logf("chromium did not exit within its deadline (attempt %d of %d); trying again", i, attempts)
		default:
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
	}
}
