package funnel

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/idem-dev/idem/ledger"
)

// The embeddings of calls: a check's own, and those of the session's
// calls, which are computed after their claim (or when a check first
// needs one) and written to their records, so that no record stays blind:
// a call claimed without its embedding (there was nothing to compare it
// with, or the budget ran out) is embedded in the background and compared
// with by every later check, on this replica and on others, and after a
// restart.

// writers is how many goroutines write embeddings to records.
const writers = 2

// maxPendingWrites bounds the embeddings waiting for the writers (each
// holds its vectors); past it one is dropped, and computed again when a
// check needs it.
const maxPendingWrites = 4096

// writeAttempts bounds how often an embedding's write is tried.
const writeAttempts = 4

// write is one embedding to write to its record.
type write struct {
	tenant, key string
	seq, hash   uint64
	vec         []float32
	// s and e are the view and entry to drop the exact vectors from once
	// the record holds them (nil: none).
	s *session
	e *entry
}

// embedOwn asks the encoder queue for the call's own text embedding, at
// the front of the queue; the flight is kept in c.fl. It fails at once
// when the queue cannot serve it within the check's deadline.
func (f *Funnel) embedOwn(c *check) (*flight, error) {
	if c.fl != nil {
		return c.fl, nil
	}
	fl, err := f.submit(c.call.TextView(), true, c.deadline)
	if err != nil {
		return nil, err
	}
	if n := f.windowCount(c.call.TextView()); n > 1 {
		c.note("text view longer than the encoder's %d tokens: compared in %d windows", f.tok.MaxTokens(), n)
	}
	c.fl = fl
	return fl, nil
}

// windowCount is the number of windows a text view is compared in.
func (f *Funnel) windowCount(text string) int {
	ps, _, err := f.pieces(text)
	if err != nil {
		return 1
	}
	return len(ps)
}

// submit queues a text view's windows with the encoder.
func (f *Funnel) submit(view string, urgent bool, deadline time.Time) (*flight, error) {
	ps, tokens, err := f.pieces(view)
	if err != nil {
		return nil, err
	}
	return f.enc.submit(xxhash.Sum64String(view), ps, tokens, urgent, deadline)
}

// embedEntry makes sure e's embedding is computed: view is its call's text
// view. The flight's outcome is kept in e (under s.mu, which the caller
// holds) and written to e's record. With urgent, a check waits for it.
func (f *Funnel) embedEntry(s *session, tenant string, e *entry, view string, urgent bool, deadline time.Time) (*flight, error) {
	if e.fl != nil && (!urgent || e.fl.ready() != nil) {
		return e.fl, nil
	}
	fl, err := f.submit(view, urgent, deadline)
	if err != nil {
		return nil, err
	}
	f.keep(s, tenant, e, fl, view, 1)
	return fl, nil
}

// keep records fl as e's embedding in flight: when it ends well the
// vectors go into e and to its record; when it fails, the embedding is
// tried again in the background (up to writeAttempts times), and until
// then a check that needs it asks for it itself. The caller holds s.mu.
func (f *Funnel) keep(s *session, tenant string, e *entry, fl *flight, view string, attempt int) {
	e.fl, e.text = fl, textSome
	f.pending.add(1)
	if !fl.onDone(func(fl *flight) {
		s.mu.Lock()
		f.landed(s, tenant, e, fl, view, attempt)
		s.mu.Unlock()
	}) {
		f.landed(s, tenant, e, fl, view, attempt) // ended already; s.mu is ours
	}
}

// landed takes in the outcome of e's flight. The caller holds s.mu.
func (f *Funnel) landed(s *session, tenant string, e *entry, fl *flight, view string, attempt int) {
	defer f.pending.add(-1)
	if e.fl == fl {
		e.fl = nil
	}
	if fl.err != nil {
		if !errors.Is(fl.err, errClosed) {
			f.log.Warn("funnel: embedding a claimed call", "tenant", tenant, "key", e.key, "attempt", attempt, "err", fl.err)
		}
		if attempt < writeAttempts && f.ctx.Err() == nil && e.qv == nil {
			if next, err := f.submit(view, false, time.Time{}); err == nil {
				f.keep(s, tenant, e, next, view, attempt+1)
			}
		}
		return
	}
	if e.wide != "" {
		f.addScope(e.wide, e.wideTag, e, fl.windows[0])
		f.landing.done(e.wide, e.wideTag, e)
		e.wide, e.wideTag = "", ""
	}
	if e.qv == nil {
		e.qv, e.vecs = quantize(fl.windows), fl.windows
		s.resize(e)
		f.queueWrite(write{tenant: tenant, key: e.key, seq: e.seq, hash: e.hash, vec: slices.Concat(fl.windows...), s: s, e: e})
	}
}

// queueWrite hands an embedding to the writers; when they are too far
// behind it is dropped (the record stays without it, and the next check
// that needs it computes it again).
func (f *Funnel) queueWrite(w write) {
	f.pending.add(1)
	select {
	case f.writes <- w:
	default:
		f.pending.add(-1)
		f.log.Warn("funnel: embedding writes are behind; one is dropped", "tenant", w.tenant, "key", w.key)
	}
}

// writeLoop writes embeddings to their records until ctx ends, retrying a
// failed write with a growing pause.
func (f *Funnel) writeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case w := <-f.writes:
			f.writeOne(ctx, w)
			f.pending.add(-1)
		}
	}
}

func (f *Funnel) writeOne(ctx context.Context, w write) {
	pause := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := f.ledger.SetEmbedding(ctx, w.tenant, w.key, w.seq, w.hash, f.model, w.vec)
		if err == nil {
			// The record holds the exact vectors now: the view keeps
			// only the quantized ones.
			if w.s != nil {
				w.s.mu.Lock()
				w.e.vecs = nil
				w.s.resize(w.e)
				w.s.mu.Unlock()
			}
			return
		}
		if errors.Is(err, ledger.ErrNotFound) {
			return // the record is gone or claimed anew
		}
		if attempt == writeAttempts || ctx.Err() != nil {
			f.log.Warn("funnel: writing an embedding to its record", "tenant", w.tenant, "key", w.key, "err", err)
			return
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return
		}
		pause *= 4
	}
}

// counter counts work in progress; zero returns a channel closed when the
// count is zero. Unlike a sync.WaitGroup, it may go up while someone waits.
type counter struct {
	mu sync.Mutex // guards n and z
	n  int
	z  chan struct{} // closed while n is zero; nil until first used
}

func (c *counter) add(d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.z == nil {
		c.z = make(chan struct{})
		close(c.z)
	}
	was := c.n
	c.n += d
	switch {
	case was == 0 && c.n > 0:
		c.z = make(chan struct{})
	case was > 0 && c.n == 0:
		close(c.z)
	}
}

func (c *counter) zero() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.z == nil {
		c.z = make(chan struct{})
		close(c.z)
	}
	return c.z
}
