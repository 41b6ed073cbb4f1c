package funnel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idem-dev/idem/internal/half"
)

// The encoder queue stands between the funnel and its Embedder. Every text
// the funnel embeds goes through it: a check's own text view when the
// session holds a candidate to compare it with (urgent), and the text views
// of calls already claimed, embedded after their claim so that later
// checks find them ready (background). A worker takes what is queued,
// urgent first, into one Embedder call (a batch), so concurrent checks share
// the model's work instead of queueing behind each other one by one.
//
// Admission control: the queue keeps a running estimate of the encoder's
// cost per token. A check whose text could not be embedded before its
// deadline, given what is queued before it, is told so at once
// (errTooLate), and a full queue refuses (errQueueFull): the check then
// answers that it could not compare, rather than wait past its budget for
// an answer it cannot use. What the queue computes is used even when the
// check that asked has given up: the claim attaches it to the record.

var (
	// errQueueFull: the encoder queue holds as many texts as it may.
	errQueueFull = errors.New("funnel: encoder queue full")
	// errTooLate: the queue's estimate says the text would be embedded
	// after the check's deadline.
	errTooLate = errors.New("funnel: the encoder cannot embed it within the budget")
	// errClosed: the funnel is closing.
	errClosed = errors.New("funnel: closed")
)

// flight is one text view being embedded, window by window.
type flight struct {
	done    chan struct{} // closed when windows or err is set
	windows [][]float32
	err     error

	mu   sync.Mutex // guards then and ended
	then []func(*flight)
	// ended is set once done is closed, under mu, so that a callback
	// added afterwards runs at once.
	ended bool
}

func newFlight() *flight { return &flight{done: make(chan struct{})} }

// finish sets the outcome, releases waiters and runs the callbacks.
func (fl *flight) finish(windows [][]float32, err error) {
	fl.windows, fl.err = windows, err
	close(fl.done)
	fl.mu.Lock()
	fl.ended = true
	then := fl.then
	fl.then = nil
	fl.mu.Unlock()
	for _, fn := range then {
		fn(fl)
	}
}

// onDone registers fn to run when the flight ends, in the goroutine that
// ends it, and reports true; when the flight has already ended it
// registers nothing and reports false.
func (fl *flight) onDone(fn func(*flight)) bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.ended {
		return false
	}
	fl.then = append(fl.then, fn)
	return true
}

// ready returns the windows if the flight ended well, else nil.
func (fl *flight) ready() [][]float32 {
	select {
	case <-fl.done:
		if fl.err == nil {
			return fl.windows
		}
	default:
	}
	return nil
}

// wait waits for the flight until ctx ends.
func (fl *flight) wait(ctx context.Context) ([][]float32, error) {
	select {
	case <-fl.done:
		return fl.windows, fl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// job is one text view in the queue: its windows, embedded together.
type job struct {
	id      uint64 // the text view's hash: one flight per text
	texts   []string
	tokens  int
	fl      *flight
	urgent  bool
	running bool
}

// encoderQueue batches embedding requests in front of an Embedder. It is
// safe for concurrent use; its workers belong to the Funnel.
type encoderQueue struct {
	emb      Embedder
	dim      int
	maxBatch int // texts per Embedder call
	maxQueue int // urgent texts waiting
	maxBack  int // background texts waiting
	workers  int
	now      func() time.Time

	mu         sync.Mutex // guards everything below
	urgent     []*job
	background []*job
	queued     [2]int // texts waiting: [0] urgent, [1] background
	urgentTok  int    // tokens of the urgent jobs waiting
	byID       map[uint64]*job
	nsPerToken float64   // the cost estimate, 0 until measured
	busyUntil  time.Time // estimated end of the batches running
	running    int       // batches running
	closed     bool
	wake       chan struct{} // a token when work arrives
	idle       chan struct{} // closed when nothing is queued or running; replaced when work arrives
}

func newEncoderQueue(emb Embedder, cfg Config) *encoderQueue {
	q := &encoderQueue{
		emb: emb, dim: emb.Dim(), maxBatch: cfg.EncoderBatch, maxQueue: cfg.EncoderQueue,
		maxBack: cfg.BackgroundQueue, workers: cfg.EncoderWorkers, now: time.Now,
		byID: map[uint64]*job{}, wake: make(chan struct{}, 1), idle: make(chan struct{}),
	}
	close(q.idle)
	return q
}

// submit queues the windows of one text view (id its hash, tokens their
// token count) and returns the flight that will carry its vectors. The
// same text view already queued or running shares its flight (and an
// urgent request moves a waiting background one ahead). An urgent request
// is refused at once when the queue is full (errQueueFull) or when the
// estimate says its vectors would come after deadline (errTooLate); a
// background one only when its queue is full.
func (q *encoderQueue) submit(id uint64, texts []string, tokens int, urgent bool, deadline time.Time) (*flight, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, errClosed
	}
	j, held := q.byID[id]
	if held && (j.urgent || j.running || !urgent) {
		if urgent && !j.running && q.late(j.tokens, deadline) {
			return nil, errTooLate
		}
		return j.fl, nil
	}
	if urgent {
		if q.queued[0]+len(texts) > q.maxQueue {
			return nil, errQueueFull
		}
		if q.late(tokens, deadline) {
			return nil, errTooLate
		}
	} else if q.queued[1]+len(texts) > q.maxBack {
		return nil, errQueueFull
	}
	if held { // a background job waiting, wanted now
		q.background = without(q.background, j)
		q.queued[1] -= len(j.texts)
	} else {
		j = &job{id: id, texts: texts, tokens: tokens, fl: newFlight()}
		q.byID[id] = j
	}
	j.urgent = urgent
	if urgent {
		q.urgent = append(q.urgent, j)
		q.queued[0] += len(j.texts)
		q.urgentTok += j.tokens
	} else {
		q.background = append(q.background, j)
		q.queued[1] += len(j.texts)
	}
	q.busy()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return j.fl, nil
}

// late reports whether tokens more, queued behind the urgent work waiting
// and the batches running, would be embedded after deadline. q.mu held.
func (q *encoderQueue) late(tokens int, deadline time.Time) bool {
	if q.nsPerToken == 0 || deadline.IsZero() {
		return false // nothing measured yet: let it try
	}
	now := q.now()
	start := now
	if q.busyUntil.After(now) {
		start = q.busyUntil
	}
	cost := time.Duration(q.nsPerToken * float64(q.urgentTok+tokens) / float64(q.workers))
	return start.Add(cost).After(deadline)
}

// busy marks the queue as having work. q.mu held.
func (q *encoderQueue) busy() {
	select {
	case <-q.idle:
		q.idle = make(chan struct{})
	default:
	}
}

// take removes the next batch: urgent jobs first, then background ones,
// up to maxBatch texts (at least one job). q.mu held.
func (q *encoderQueue) take() []*job {
	var batch []*job
	n := 0
	for _, src := range []*[]*job{&q.urgent, &q.background} {
		for len(*src) > 0 && (n == 0 || n+len((*src)[0].texts) <= q.maxBatch) {
			j := (*src)[0]
			*src = (*src)[1:]
			j.running = true
			if j.urgent {
				q.queued[0] -= len(j.texts)
				q.urgentTok -= j.tokens
			} else {
				q.queued[1] -= len(j.texts)
			}
			batch = append(batch, j)
			n += len(j.texts)
		}
	}
	return batch
}

// work runs batches until ctx ends.
func (q *encoderQueue) work(ctx context.Context) {
	for {
		q.mu.Lock()
		batch := q.take()
		if len(batch) == 0 {
			q.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-q.wake:
				continue
			}
		}
		tokens := 0
		for _, j := range batch {
			tokens += j.tokens
		}
		q.running++
		start := q.now()
		end := start.Add(time.Duration(q.nsPerToken * float64(tokens)))
		if end.After(q.busyUntil) {
			q.busyUntil = end
		}
		q.mu.Unlock()

		err := q.run(ctx, batch)
		took := q.now().Sub(start)

		q.mu.Lock()
		q.running--
		if err == nil && tokens > 0 {
			// An exponentially weighted mean of the cost per token.
			ns := float64(took.Nanoseconds()) / float64(tokens)
			if q.nsPerToken == 0 {
				q.nsPerToken = ns
			} else {
				q.nsPerToken = 0.7*q.nsPerToken + 0.3*ns
			}
		}
		for _, j := range batch {
			delete(q.byID, j.id)
		}
		if len(q.urgent) == 0 && len(q.background) == 0 && q.running == 0 {
			select {
			case <-q.idle:
			default:
				close(q.idle)
			}
		}
		q.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// run embeds a batch in one Embedder call and finishes its flights.
func (q *encoderQueue) run(ctx context.Context, batch []*job) error {
	var texts []string
	for _, j := range batch {
		texts = append(texts, j.texts...)
	}
	vecs, err := q.emb.Embed(ctx, texts)
	if err == nil && len(vecs) != len(texts) {
		err = fmt.Errorf("funnel: embedder returned %d vectors for %d texts", len(vecs), len(texts))
	}
	for i := 0; err == nil && i < len(vecs); i++ {
		if len(vecs[i]) != q.dim {
			err = fmt.Errorf("funnel: embedder returned a vector of %d values, want %d", len(vecs[i]), q.dim)
		}
		// Halves from here on: the call's record stores them in half the
		// bytes, and the check compares what a later check will read back.
		// (An embedder whose values pass ±65504 keeps its floats.)
		half.Round(vecs[i])
	}
	at := 0
	for _, j := range batch {
		if err != nil {
			j.fl.finish(nil, fmt.Errorf("embed: %w", err))
			continue
		}
		j.fl.finish(vecs[at:at+len(j.texts):at+len(j.texts)], nil)
		at += len(j.texts)
	}
	return err
}

// close refuses new work and fails what is still queued.
func (q *encoderQueue) close() {
	q.mu.Lock()
	q.closed = true
	var left []*job
	left = append(append(left, q.urgent...), q.background...)
	q.urgent, q.background = nil, nil
	for _, j := range left {
		delete(q.byID, j.id)
	}
	q.mu.Unlock()
	for _, j := range left {
		j.fl.finish(nil, errClosed)
	}
}

// settled returns a channel closed when nothing is queued or running.
func (q *encoderQueue) settled() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.idle
}

// QueueStats is what the encoder queue holds.
type QueueStats struct {
	// Check counts the texts of checks waiting to be embedded (bounded by
	// Config.EncoderQueue); Background those of claimed calls, embedded
	// after their check answered (bounded by Config.BackgroundQueue).
	Check, Background int
	// Running counts the batches the encoder is embedding now.
	Running int
}

// QueueStats reports what the encoder queue holds now (zero without an
// embedder).
func (f *Funnel) QueueStats() QueueStats {
	q := f.enc
	if q == nil {
		return QueueStats{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return QueueStats{Check: q.queued[0], Background: q.queued[1], Running: q.running}
}
