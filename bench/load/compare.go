package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Target is a server under load: idem, or the anchor.
type Target struct {
	Name, URL string
}

// CompareConfig configures Compare. Start from DefaultCompareConfig.
type CompareConfig struct {
	Targets []Target
	// Clients are the numbers of concurrent clients of new calls.
	Clients []int
	// Rounds is how many times every measurement runs; the targets take
	// turns within a round (in another order each round), so a slow
	// moment of the shared machine falls on all of them alike.
	Rounds           int
	Warmup, Duration time.Duration
	// KeyHitClients check completed calls, alone and then beside a write
	// load of WriteClients clients of new calls paced at WriteRate pairs
	// per second in all. KeyHitClients 0 skips that part.
	KeyHitClients, WriteClients int
	WriteRate                   float64
	// Progress receives a line per measurement; nil discards them.
	Progress io.Writer
}

// DefaultCompareConfig returns 1, 8 and 32 clients, 5 rounds of 1 s warmup
// and 5 s measured, and key hits by 8 clients beside 8 writers at 300
// pairs/s.
func DefaultCompareConfig(targets ...Target) CompareConfig {
	return CompareConfig{
		Targets: targets, Clients: []int{1, 8, 32}, Rounds: 5, Warmup: time.Second, Duration: 5 * time.Second,
		KeyHitClients: 8, WriteClients: 8, WriteRate: 300,
	}
}

// Validate reports the first invalid field.
func (c CompareConfig) Validate() error {
	switch {
	case len(c.Targets) == 0:
		return errors.New("compare config: no targets")
	case c.Rounds < 1:
		return fmt.Errorf("compare config: Rounds must be at least 1, got %d", c.Rounds)
	case c.KeyHitClients < 0 || c.WriteClients < 0 || c.WriteRate < 0:
		return errors.New("compare config: KeyHitClients, WriteClients and WriteRate must not be negative")
	case c.KeyHitClients > 0 && (c.WriteClients == 0 || c.WriteRate == 0):
		return errors.New("compare config: key hits beside a write load need WriteClients and WriteRate")
	}
	for _, n := range c.Clients {
		if n < 1 {
			return fmt.Errorf("compare config: Clients must be at least 1, got %d", n)
		}
	}
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if t.Name == "" || t.URL == "" || seen[t.Name] {
			return fmt.Errorf("compare config: target %q: a unique name and a URL are required", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// Report holds every round's results.
type Report struct {
	Config CompareConfig
	// NewCalls[target][clients] and KeyHits[target]["alone" or "writes"]
	// hold one Result per round; Writes[target] the write load's.
	NewCalls map[string]map[int][]Result
	KeyHits  map[string]map[string][]Result
	Writes   map[string][]Result
}

// Compare runs cfg's measurements, rounds interleaved.
func Compare(ctx context.Context, cfg CompareConfig) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	rep := &Report{Config: cfg, NewCalls: map[string]map[int][]Result{}, KeyHits: map[string]map[string][]Result{}, Writes: map[string][]Result{}}
	for _, t := range cfg.Targets {
		rep.NewCalls[t.Name] = map[int][]Result{}
		rep.KeyHits[t.Name] = map[string][]Result{}
	}
	stamp := time.Now().UnixNano()
	run := func(t Target, w Workload, clients int, rate float64, tag string) (Result, error) {
		c := DefaultConfig(t.URL)
		c.Workload, c.Clients, c.Rate, c.Warmup, c.Duration = w, clients, rate, cfg.Warmup, cfg.Duration
		c.Prefix = fmt.Sprintf("load-%d-%s", stamp, tag)
		return Run(ctx, c)
	}
	for round := range cfg.Rounds {
		order := slices.Clone(cfg.Targets)
		for range round % len(order) { // rotate: each target goes first in turn
			order = append(order[1:], order[0])
		}
		for _, n := range cfg.Clients {
			for _, t := range order {
				r, err := run(t, NewCalls, n, 0, fmt.Sprintf("%s-r%d-new-c%d", t.Name, round, n))
				if err != nil {
					return nil, fmt.Errorf("%s, new calls, %d clients, round %d: %w", t.Name, n, round+1, err)
				}
				rep.NewCalls[t.Name][n] = append(rep.NewCalls[t.Name][n], r)
				fmt.Fprintf(progress, "round %d %s new calls, %d clients: %.0f pairs/s, p50 %v p99 %v, %d uncompared\n", round+1, t.Name, n, r.PerSec, r.P50, r.P99, r.Uncompared)
			}
		}
		if cfg.KeyHitClients == 0 {
			continue
		}
		for _, t := range order {
			tag := fmt.Sprintf("%s-r%d", t.Name, round)
			alone, err := run(t, KeyHits, cfg.KeyHitClients, 0, tag+"-hit")
			if err != nil {
				return nil, fmt.Errorf("%s, key hits, round %d: %w", t.Name, round+1, err)
			}
			var (
				wg         sync.WaitGroup
				writes     Result
				errW, errH error
				beside     Result
			)
			wg.Go(func() { writes, errW = run(t, NewCalls, cfg.WriteClients, cfg.WriteRate, tag+"-wl") })
			wg.Go(func() { beside, errH = run(t, KeyHits, cfg.KeyHitClients, 0, tag+"-hitwl") })
			wg.Wait()
			if err := errors.Join(errW, errH); err != nil {
				return nil, fmt.Errorf("%s, key hits beside writes, round %d: %w", t.Name, round+1, err)
			}
			rep.KeyHits[t.Name]["alone"] = append(rep.KeyHits[t.Name]["alone"], alone)
			rep.KeyHits[t.Name]["writes"] = append(rep.KeyHits[t.Name]["writes"], beside)
			rep.Writes[t.Name] = append(rep.Writes[t.Name], writes)
			fmt.Fprintf(progress, "round %d %s key hits: %.0f/s alone, %.0f/s beside %.0f pairs/s of writes (p50 %v / %v), %d writes uncompared\n",
				round+1, t.Name, alone.PerSec, beside.PerSec, writes.PerSec, alone.P50, beside.P50, writes.Uncompared)
		}
	}
	return rep, nil
}

// stat is the median and range of one measurement over the rounds.
type stat struct{ med, lo, hi float64 }

func statOf(rs []Result, f func(Result) float64) stat {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return stat{}
	}
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return stat{med, v[0], v[len(v)-1]}
}

func perSec(r Result) float64 { return r.PerSec }
func p50ms(r Result) float64  { return float64(r.P50) / 1e6 }
func p99ms(r Result) float64  { return float64(r.P99) / 1e6 }

// Markdown writes the report as tables of medians (with their range over
// the rounds), each target beside the first, which is the one measured
// against the others.
func (rep *Report) Markdown(w io.Writer) {
	cfg := rep.Config
	first := cfg.Targets[0].Name
	var b strings.Builder
	fmt.Fprintf(&b, "New call, check + complete (pairs/s; p50 / p99 ms); medians of %d interleaved rounds of %v, range in brackets\n\n", cfg.Rounds, cfg.Duration)
	b.WriteString("| clients |")
	for _, t := range cfg.Targets {
		fmt.Fprintf(&b, " %s |", t.Name)
	}
	for _, t := range cfg.Targets[1:] {
		fmt.Fprintf(&b, " %s / %s |", first, t.Name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", 2*len(cfg.Targets)-1) + "\n")
	for _, n := range cfg.Clients {
		fmt.Fprintf(&b, "| %d |", n)
		for _, t := range cfg.Targets {
			rs := rep.NewCalls[t.Name][n]
			s := statOf(rs, perSec)
			fmt.Fprintf(&b, " %.0f [%.0f–%.0f]; %.1f / %.1f |", s.med, s.lo, s.hi, statOf(rs, p50ms).med, statOf(rs, p99ms).med)
		}
		base := statOf(rep.NewCalls[first][n], perSec).med
		for _, t := range cfg.Targets[1:] {
			fmt.Fprintf(&b, " %.2f |", base/statOf(rep.NewCalls[t.Name][n], perSec).med)
		}
		b.WriteString("\n")
	}
	var notes []string
	for _, t := range cfg.Targets {
		total := 0
		for _, rs := range rep.NewCalls[t.Name] {
			for _, r := range rs {
				total += r.Uncompared
			}
		}
		for _, r := range rep.Writes[t.Name] {
			total += r.Uncompared
		}
		if total > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d new calls answered confirm, not compared (session still loading)", t.Name, total))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n" + strings.Join(notes, "; ") + "\n")
	}
	if cfg.KeyHitClients > 0 {
		fmt.Fprintf(&b, "\nKey hits, %d clients: alone, and beside %d clients of new calls paced at %.0f pairs/s (checks/s; p50 ms)\n\n", cfg.KeyHitClients, cfg.WriteClients, cfg.WriteRate)
		b.WriteString("| target | alone | beside the writes | writes done (pairs/s) | beside / alone |\n|---|---|---|---|---|\n")
		for _, t := range cfg.Targets {
			alone, beside := rep.KeyHits[t.Name]["alone"], rep.KeyHits[t.Name]["writes"]
			a, s := statOf(alone, perSec), statOf(beside, perSec)
			fmt.Fprintf(&b, "| %s | %.0f [%.0f–%.0f]; %.2f | %.0f [%.0f–%.0f]; %.2f | %.0f | %.2f |\n", t.Name,
				a.med, a.lo, a.hi, statOf(alone, p50ms).med, s.med, s.lo, s.hi, statOf(beside, p50ms).med,
				statOf(rep.Writes[t.Name], perSec).med, ratioMedian(beside, alone))
		}
	}
	io.WriteString(w, b.String())
}

// ratioMedian is the median over the rounds of beside/alone, each round's
// pair measured back to back.
func ratioMedian(beside, alone []Result) float64 {
	n := min(len(beside), len(alone))
	rs := make([]Result, n)
	for i := range n {
		rs[i] = Result{PerSec: beside[i].PerSec / alone[i].PerSec}
	}
	return statOf(rs, perSec).med
}
