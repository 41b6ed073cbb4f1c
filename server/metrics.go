package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger"
)

// metrics are the server's Prometheus metrics. Labels are bounded: tenant
// (from the configured keys), tool (only tools named in the config, else
// "other"), stage, decision, route, code; never a session or key.
type metrics struct {
	checks      *prometheus.CounterVec   // tenant, tool, stage, decision
	stage       *prometheus.HistogramVec // stage
	overruns    *prometheus.CounterVec   // tenant
	judge       *prometheus.CounterVec   // outcome
	transitions *prometheus.CounterVec   // tenant, state
	takeovers   *prometheus.CounterVec   // tenant
	corrupts    *prometheus.CounterVec   // tenant
	requests    *prometheus.CounterVec   // route, code
	latency     *prometheus.HistogramVec // route
}

func newMetrics(reg prometheus.Registerer, deps Deps) (*metrics, error) {
	cache, views, queue, syncs := deps.CacheStats, deps.ViewStats, deps.QueueStats, deps.SyncStats
	m := &metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_checks_total",
			Help: "Checks answered, by the stage that decided and the decision (the hits per layer).",
		}, []string{"tenant", "tool", "stage", "decision"}),
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idem_stage_duration_seconds",
			Help:    "Time each funnel stage took in a check (stage total: the whole check).",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 17), // 25 µs … 1.6 s
		}, []string{"stage"}),
		overruns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_budget_exceeded_total",
			Help: "Checks whose budget ran out before the semantic stage or the judge finished.",
		}, []string{"tenant"}),
		judge: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_judge_calls_total",
			Help: "Judge calls by outcome: duplicate, distinct, or failed (error or timeout: the fallback decided).",
		}, []string{"outcome"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_ledger_transitions_total",
			Help: "Ledger records entering a state through this server: pending (claimed), success, failed_transient, failed_permanent, forgotten.",
		}, []string{"tenant", "state"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_lease_takeovers_total",
			Help: "Uncertain keys taken over with a new lease.",
		}, []string{"tenant"}),
		corrupts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_ledger_corrupt_records_total",
			Help: "Requests answered 500 because a record failed the store's integrity check (the problem names its key; DELETE removes it).",
		}, []string{"tenant"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "idem_http_requests_total",
			Help: "HTTP requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "idem_http_request_duration_seconds",
			Help:    "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"route"}),
	}
	cs := []prometheus.Collector{m.checks, m.stage, m.overruns, m.judge, m.transitions, m.takeovers, m.corrupts, m.requests, m.latency}
	if cache != nil {
		cs = append(cs,
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "idem_embed_cache_hits_total",
				Help: "Texts whose embedding came from the cache.",
			}, func() float64 { h, _ := cache(); return float64(h) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "idem_embed_cache_misses_total",
				Help: "Texts the cache sent to the encoder.",
			}, func() float64 { _, mi := cache(); return float64(mi) }),
		)
	}
	if views != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "idem_session_views",
				Help: "Session views held in memory (sessions.max_views bounds them).",
			}, func() float64 { return float64(views().Views) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "idem_session_view_bytes",
				Help: "Memory of the session views, as estimated per call (sessions.max_view_bytes bounds it).",
			}, func() float64 { return float64(views().Bytes) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "idem_session_views_dropped_total",
				Help: "Session views dropped, least recently used first, to keep within sessions.max_views and max_view_bytes (each is loaded again from the ledger when next needed).",
			}, func() float64 { return float64(views().Dropped) }),
		)
	}
	if queue != nil {
		for _, q := range []struct {
			name string
			n    func(funnel.QueueStats) int
		}{{"check", func(s funnel.QueueStats) int { return s.Check }}, {"background", func(s funnel.QueueStats) int { return s.Background }}} {
			cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "idem_encoder_queued_texts",
				Help:        "Texts waiting for the encoder: queue=check (checks' own, bounded by embedder.queue) or background (claimed calls', bounded by embedder.background_queue).",
				ConstLabels: prometheus.Labels{"queue": q.name},
			}, func() float64 { return float64(q.n(queue())) }))
		}
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "idem_encoder_batches_running",
			Help: "Batches the encoder is embedding now (at most embedder.workers).",
		}, func() float64 { return float64(queue().Running) }))
	}
	if syncs != nil {
		for _, c := range []struct {
			name, help string
			v          func(ledger.SyncStats) float64
		}{
			{"idem_store_sync_rounds_total", "Sync rounds the store ran (store.sync_writes): each fsynced its logs once, for every write that came before it.",
				func(s ledger.SyncStats) float64 { return float64(s.Rounds) }},
			{"idem_store_sync_operations_total", "Operations that waited for a sync round: writes, and reads of a record not yet durable. Divided by the rounds: how many shared one.",
				func(s ledger.SyncStats) float64 { return float64(s.Operations) }},
			{"idem_store_sync_seconds_total", "Time the sync rounds took, fsyncs included. Divided by the rounds: the mean round.",
				func(s ledger.SyncStats) float64 { return s.Seconds }},
			{"idem_store_sync_wait_seconds_total", "Time operations waited for their sync round. Divided by the operations: what durability adds to a write.",
				func(s ledger.SyncStats) float64 { return s.WaitSeconds }},
		} {
			cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
				func() float64 { return c.v(syncs()) }))
		}
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observeCheck(tenant, tool string, req *funnel.Request, res *funnel.Result) {
	m.checks.WithLabelValues(tenant, tool, string(res.Stage), string(res.Decision)).Inc()
	for stage, us := range res.TimingsUS {
		m.stage.WithLabelValues(stage).Observe(float64(us) / 1e6)
	}
	if res.BudgetExceeded {
		m.overruns.WithLabelValues(tenant).Inc()
	}
	switch {
	case res.Judge != nil && res.Judge.Duplicate:
		m.judge.WithLabelValues("duplicate").Inc()
	case res.Judge != nil:
		m.judge.WithLabelValues("distinct").Inc()
	default:
		if _, asked := res.TimingsUS["judge"]; asked {
			m.judge.WithLabelValues("failed").Inc()
		}
	}
	if res.Decision == funnel.Execute {
		m.transitions.WithLabelValues(tenant, "pending").Inc()
		if req.Takeover && res.Stage == funnel.StageKey {
			m.takeovers.WithLabelValues(tenant).Inc()
		}
	}
}

func (m *metrics) transition(tenant, state string) {
	m.transitions.WithLabelValues(tenant, state).Inc()
}

func (m *metrics) corrupt(tenant string) {
	m.corrupts.WithLabelValues(tenant).Inc()
}

func (m *metrics) request(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}
