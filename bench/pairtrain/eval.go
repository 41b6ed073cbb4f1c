package pairtrain

import (
	"math"
	"slices"
)

// Point is one operating point: pairs flagged as the same at or above a
// threshold.
type Point struct {
	Threshold      float64
	TP, FP, FN, TN int
}

// Recall is TP/(TP+FN), NaN without positives.
func (p Point) Recall() float64 { return ratio(p.TP, p.TP+p.FN) }

// Precision is TP/(TP+FP), NaN when nothing is flagged.
func (p Point) Precision() float64 { return ratio(p.TP, p.TP+p.FP) }

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// rule counts the pairs a fixed decision flags.
func rule(flag []bool, same []bool) Point {
	var p Point
	for i := range flag {
		p.add(flag[i], same[i])
	}
	p.Threshold = math.NaN()
	return p
}

func (p *Point) add(flag, same bool) {
	switch {
	case flag && same:
		p.TP++
	case flag:
		p.FP++
	case same:
		p.FN++
	default:
		p.TN++
	}
}

// at flags the scores at or above t.
func at(score []float64, same []bool, t float64) Point {
	p := Point{Threshold: t}
	for i := range score {
		p.add(score[i] >= t, same[i])
	}
	return p
}

// thresholds are the distinct scores, highest first.
func thresholds(score []float64) []float64 {
	ts := slices.Clone(score)
	slices.Sort(ts)
	ts = slices.Compact(ts)
	slices.Reverse(ts)
	return ts
}

// atRecall is the highest threshold whose recall reaches r (the fewest
// false positives for that recall).
func atRecall(score []float64, same []bool, r float64) Point {
	best := Point{Threshold: math.Inf(1)}
	for _, t := range thresholds(score) {
		p := at(score, same, t)
		if p.Recall() >= r-1e-12 {
			return p
		}
		best = p
	}
	return best
}

// atFP is the lowest threshold with at most fp false positives (the
// highest recall for that many).
func atFP(score []float64, same []bool, fp int) Point {
	best := Point{Threshold: math.Inf(1)}
	for _, t := range thresholds(score) {
		p := at(score, same, t)
		if p.FP > fp {
			break
		}
		best = p
	}
	if math.IsInf(best.Threshold, 1) {
		best = at(score, same, best.Threshold)
	}
	return best
}

// atPrecision is the lowest threshold at and above which every threshold
// keeps precision at least target (the highest recall that does).
func atPrecision(score []float64, same []bool, target float64) Point {
	best := at(score, same, math.Inf(1))
	for _, t := range thresholds(score) {
		p := at(score, same, t)
		if p.Precision() < target-1e-12 {
			break
		}
		best = p
	}
	return best
}

// Quality is a probability's fit to the labels.
type Quality struct {
	N, Pos  int
	AUC     float64 // the chance a random positive outscores a random negative
	LogLoss float64 // mean negative log-likelihood
	ECE     float64 // mean |predicted − observed| over 10 equal-width bins, weighted by size
}

func quality(prob []float64, same []bool) Quality {
	q := Quality{N: len(prob)}
	type ps struct {
		p float64
		y bool
	}
	xs := make([]ps, len(prob))
	for i := range prob {
		xs[i] = ps{prob[i], same[i]}
		if same[i] {
			q.Pos++
		}
		p := math.Min(math.Max(prob[i], 1e-12), 1-1e-12)
		if same[i] {
			q.LogLoss -= math.Log(p)
		} else {
			q.LogLoss -= math.Log(1 - p)
		}
	}
	if q.N > 0 {
		q.LogLoss /= float64(q.N)
	}
	// AUC by ranks, ties counted half.
	slices.SortStableFunc(xs, func(a, b ps) int {
		switch {
		case a.p < b.p:
			return -1
		case a.p > b.p:
			return 1
		}
		return 0
	})
	var rankSum float64
	for i := 0; i < len(xs); {
		j := i
		for j < len(xs) && xs[j].p == xs[i].p {
			j++
		}
		r := float64(i+j+1) / 2 // mean 1-based rank of the tie group
		for k := i; k < j; k++ {
			if xs[k].y {
				rankSum += r
			}
		}
		i = j
	}
	neg := q.N - q.Pos
	if q.Pos > 0 && neg > 0 {
		q.AUC = (rankSum - float64(q.Pos*(q.Pos+1))/2) / float64(q.Pos*neg)
	} else {
		q.AUC = math.NaN()
	}
	var bins [10]struct {
		n, pos int
		sum    float64
	}
	for _, x := range xs {
		b := min(int(x.p*10), 9)
		bins[b].n++
		bins[b].sum += x.p
		if x.y {
			bins[b].pos++
		}
	}
	for _, b := range bins {
		if b.n > 0 {
			q.ECE += float64(b.n) / float64(q.N) * math.Abs(b.sum/float64(b.n)-float64(b.pos)/float64(b.n))
		}
	}
	return q
}
