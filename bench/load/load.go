// Package load drives a server speaking idem's check and complete (idem
// itself, or the Redis-backed anchor of this package) with concurrent
// clients over HTTP, and measures throughput and latency: the load
// benchmark that bench/load/run runs.
//
// Every client is an agent with its own session and workflow; after
// SessionCalls calls it starts the next session, as an agent run ends and
// another begins (the funnel compares a call with its session's earlier
// calls, so a session of thousands measures the comparison, not the
// writes). A new call is a real check of a call never seen (an identity-only tool call, so no
// embedding is computed: the numbers are the ledger's and the HTTP path's)
// followed by the completion of the execute it was granted: one pair. A
// key hit is a check of a call already completed, answered from the
// ledger by its key.
package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/idem-dev/idem/client"
)

// Workload is what each client does in a loop.
type Workload string

const (
	// NewCalls: check a new call (answered execute), then complete it.
	NewCalls Workload = "new"
	// KeyHits: check a completed call again (answered duplicate by key).
	KeyHits Workload = "keyhit"
)

// Config configures a Run. Start from DefaultConfig.
type Config struct {
	// URL is the server's root: http://127.0.0.1:8080.
	URL string
	// Workload is what the clients do.
	Workload Workload
	// Clients is how many run at once, each with its own session.
	Clients int
	// Warmup runs before the measured Duration and is not counted.
	Warmup, Duration time.Duration
	// Rate, when positive, paces the clients to that many operations per
	// second in all (an open-loop load); 0 runs each as fast as its
	// answers come (closed loop).
	Rate float64
	// SessionCalls is how many new calls a client makes in one session
	// before it starts the next.
	SessionCalls int
	// Prefix makes the sessions, workflows and steps of this run its own,
	// so that runs against one server never see each other's calls.
	Prefix string
	// HTTPClient sends the requests; nil means one keeping a connection
	// per client.
	HTTPClient *http.Client
}

// DefaultConfig returns 8 closed-loop clients of new calls in sessions of
// 100 calls, 1 s of warmup and 5 s measured.
func DefaultConfig(url string) Config {
	return Config{URL: url, Workload: NewCalls, Clients: 8, Warmup: time.Second, Duration: 5 * time.Second, SessionCalls: 100, Prefix: "load"}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("load config: URL is empty")
	case c.Workload != NewCalls && c.Workload != KeyHits:
		return fmt.Errorf("load config: Workload must be %q or %q, got %q", NewCalls, KeyHits, c.Workload)
	case c.Clients < 1:
		return fmt.Errorf("load config: Clients must be at least 1, got %d", c.Clients)
	case c.Warmup < 0:
		return fmt.Errorf("load config: Warmup must not be negative, got %v", c.Warmup)
	case c.Duration <= 0:
		return fmt.Errorf("load config: Duration must be positive, got %v", c.Duration)
	case c.Rate < 0:
		return fmt.Errorf("load config: Rate must not be negative, got %v", c.Rate)
	case c.SessionCalls < 1:
		return fmt.Errorf("load config: SessionCalls must be at least 1, got %d", c.SessionCalls)
	case c.Prefix == "":
		return errors.New("load config: Prefix is empty")
	}
	return nil
}

// Result is what one Run measured. Ops are pairs (NewCalls) or checks
// (KeyHits) that finished inside the measured window. Uncompared counts
// the new calls answered confirm because the server could not compare
// them with their session's earlier calls (its view of the session was
// still loading: a new session under load); they are not pairs.
type Result struct {
	Workload   Workload      `json:"workload"`
	Clients    int           `json:"clients"`
	Ops        int           `json:"ops"`
	Uncompared int           `json:"uncompared,omitempty"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	PerSec     float64       `json:"per_sec"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
}

// Run runs cfg's load until its window ends (or ctx does) and returns what
// it measured. Any answer other than the one the workload expects (an
// execute for a new call, a duplicate by key for a key hit) or any failed
// request ends the run with an error: a benchmark of wrong answers
// measures nothing.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConns: cfg.Clients, MaxIdleConnsPerHost: cfg.Clients, IdleConnTimeout: time.Minute},
		}
	}
	ccfg := client.DefaultConfig(cfg.URL)
	ccfg.HTTPClient = hc
	c, err := client.New(ccfg)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	agents := make([]*agent, cfg.Clients)
	for i := range agents {
		agents[i] = &agent{c: c, prefix: fmt.Sprintf("%s-c%d", cfg.Prefix, i), per: cfg.SessionCalls}
		agents[i].next()
		if cfg.Workload == KeyHits {
			if err := agents[i].seed(ctx); err != nil {
				return Result{}, err
			}
		}
	}

	start := time.Now()
	from, until := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Duration)
	var interval time.Duration // between one client's operations when paced
	if cfg.Rate > 0 {
		interval = time.Duration(float64(cfg.Clients) / cfg.Rate * float64(time.Second))
	}
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex // guards lat, uncompared and firstErr
		lat        []time.Duration
		uncompared int
		firstErr   error
	)
	for i, a := range agents {
		wg.Go(func() {
			var (
				local   []time.Duration
				refused int
			)
			next := start.Add(interval * time.Duration(i) / time.Duration(cfg.Clients)) // spread the paced clients
			for ctx.Err() == nil {
				if interval > 0 {
					if d := time.Until(next); d > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(d):
						}
					}
					next = next.Add(interval)
				}
				t0 := time.Now()
				if t0.After(until) {
					break
				}
				var err error
				if cfg.Workload == NewCalls {
					err = a.newCall(ctx)
				} else {
					err = a.keyHit(ctx)
				}
				t1 := time.Now()
				if errors.Is(err, errUncompared) {
					if !t0.Before(from) && !t1.After(until) {
						refused++
					}
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = fmt.Errorf("client %d: %w", i, err)
						}
						mu.Unlock()
						cancel()
					}
					return
				}
				if !t0.Before(from) && !t1.After(until) {
					local = append(local, t1.Sub(t0))
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			uncompared += refused
			mu.Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return Result{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	res := Result{Workload: cfg.Workload, Clients: cfg.Clients, Ops: len(lat), Uncompared: uncompared, Elapsed: cfg.Duration}
	res.PerSec = float64(res.Ops) / cfg.Duration.Seconds()
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50, res.P99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return res, nil
}

// agent is one client: its session, its workflow and the last step.
type agent struct {
	c                 *client.Client
	prefix            string
	per               int // calls per session
	runs              int // sessions so far
	session, workflow string
	step              int
}

// next starts the agent's next session.
func (a *agent) next() {
	a.runs++
	a.session, a.workflow, a.step = fmt.Sprintf("%s-s%d", a.prefix, a.runs), fmt.Sprintf("%s-w%d", a.prefix, a.runs), 0
}

// call is a new call of an identity-only tool: every argument is an id, an
// amount or a code, so a check compares it by key and hash only.
func (a *agent) call(step int) client.CheckRequest {
	args, _ := json.Marshal(map[string]any{
		"customer_id": fmt.Sprintf("cus_%s_%d", a.session, step),
		"amount":      1000 + step%9000,
		"currency":    "EUR",
		"invoice":     fmt.Sprintf("inv-%d", step),
	})
	return client.CheckRequest{SessionID: a.session, WorkflowID: a.workflow, StepID: fmt.Sprint(step), Tool: "charge_card", Arguments: args}
}

var result = json.RawMessage(`{"charge_id":"ch_1","status":"succeeded"}`)

// newCall checks the session's next call and completes it.
func (a *agent) newCall(ctx context.Context) error {
	if a.step == a.per {
		a.next()
	}
	a.step++
	return a.execute(ctx, a.step)
}

// seed makes step 0 a completed call, which keyHit checks again.
func (a *agent) seed(ctx context.Context) error {
	if err := a.execute(ctx, 0); err != nil {
		return fmt.Errorf("seed (use a fresh prefix): %w", err)
	}
	return nil
}

// errUncompared: a new call answered confirm because the server could
// not compare it; the agent would ask, and the pair does not happen.
var errUncompared = errors.New("load: the check could not compare the call")

// execute checks the call of step, which must be new, and completes it.
func (a *agent) execute(ctx context.Context, step int) error {
	r, err := a.c.Check(ctx, a.call(step))
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if r.Decision == client.Confirm && r.NotCompared != nil {
		return errUncompared
	}
	if r.Decision != client.Execute {
		return fmt.Errorf("check of a new call: decision %q (%s), want execute", r.Decision, r.Reason)
	}
	if _, err := a.c.Complete(ctx, r.Key, r.Token, result); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	return nil
}

func (a *agent) keyHit(ctx context.Context) error {
	r, err := a.c.Check(ctx, a.call(0))
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if r.Decision != client.Duplicate || r.Stage != "key" {
		return fmt.Errorf("check of a completed call: decision %q at stage %q (%s), want duplicate by key", r.Decision, r.Stage, r.Reason)
	}
	return nil
}
