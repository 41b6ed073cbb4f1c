package bench

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Counts is a confusion matrix over labelled events, with the
// hard-negative slice and what was not scored.
type Counts struct {
	Events int `json:"events"`
	TP     int `json:"tp"`
	FP     int `json:"fp"`
	FN     int `json:"fn"`
	TN     int `json:"tn"`
	// HardNeg counts events tagged hard-negative that are expected to
	// execute; HardNegFP those of them flagged.
	HardNeg   int `json:"hard_negatives"`
	HardNegFP int `json:"hard_negative_fp"`
	// Unlabelled and Errors are events not scored.
	Unlabelled int `json:"unlabelled,omitempty"`
	Errors     int `json:"errors,omitempty"`
}

// add scores one event.
func (c *Counts) add(e *Event, flagged, errored bool) {
	c.Events++
	switch {
	case errored:
		c.Errors++
		return
	case e.Truth == nil:
		c.Unlabelled++
		return
	}
	dup := e.Truth.Expect == "duplicate"
	switch {
	case dup && flagged:
		c.TP++
	case dup:
		c.FN++
	case flagged:
		c.FP++
	default:
		c.TN++
	}
	if !dup && e.HasTag("hard-negative") {
		c.HardNeg++
		if flagged {
			c.HardNegFP++
		}
	}
}

func ratio(a, b int) *float64 {
	if b == 0 {
		return nil
	}
	r := float64(a) / float64(b)
	return &r
}

// Metrics are the rates of a confusion matrix; nil where the denominator
// is zero.
type Metrics struct {
	Counts
	Precision     *float64 `json:"precision"`
	Recall        *float64 `json:"recall"`
	F1            *float64 `json:"f1"`
	HardNegFPRate *float64 `json:"hard_negative_fp_rate"`
}

// Metrics computes the rates.
func (c Counts) Metrics() Metrics {
	m := Metrics{Counts: c, Precision: ratio(c.TP, c.TP+c.FP), Recall: ratio(c.TP, c.TP+c.FN),
		HardNegFPRate: ratio(c.HardNegFP, c.HardNeg)}
	if c.TP > 0 {
		f := 2 * float64(c.TP) / float64(2*c.TP+c.FP+c.FN)
		m.F1 = &f
	}
	return m
}

// Latency summarizes one stage's times in microseconds.
type Latency struct {
	N   int   `json:"n"`
	P50 int64 `json:"p50_us"`
	P95 int64 `json:"p95_us"`
	P99 int64 `json:"p99_us"`
	Max int64 `json:"max_us"`
	// OverBudget counts checks above the budget (the total only).
	OverBudget int `json:"over_budget,omitempty"`
	// Sorted holds every sample, for the CDF.
	Sorted []int64 `json:"-"`
}

func quantile(s []int64, q float64) int64 {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func latencyOf(samples []int64, budget time.Duration, total bool) Latency {
	s := slices.Clone(samples)
	slices.Sort(s)
	l := Latency{N: len(s), P50: quantile(s, 0.5), P95: quantile(s, 0.95), P99: quantile(s, 0.99), Sorted: s}
	if len(s) > 0 {
		l.Max = s[len(s)-1]
	}
	if total {
		for _, v := range s {
			if v > budget.Microseconds() {
				l.OverBudget++
			}
		}
	}
	return l
}

// stageOrder is the order stages are listed in.
var stageOrder = []string{"canon", "key", "wait", "refresh", "exact", "grade", "embed", "search", "judge", "claim", "total"}

// sortedKeys returns m's keys, in stageOrder where they are stages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		if i := slices.Index(stageOrder, k); i >= 0 {
			return i
		}
		return len(stageOrder)
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, rj := rank(keys[i]), rank(keys[j])
		if ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	return keys
}

// group accumulates Counts by name.
type group map[string]*Counts

func (g group) add(name string, e *Event, flagged, errored bool) {
	c := g[name]
	if c == nil {
		c = &Counts{}
		g[name] = c
	}
	c.add(e, flagged, errored)
}

func (g group) metrics() map[string]Metrics {
	out := make(map[string]Metrics, len(g))
	for k, c := range g {
		out[k] = c.Metrics()
	}
	return out
}
