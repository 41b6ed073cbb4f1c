package funnel

// Wide-scope calls without an embedding yet. A call with text joins its
// wide scope's index only once its embedding lands; until then a check of
// the scope must not take the scope for empty. This process keeps its own
// such calls aside (landing) and a check waits for their embedding; a call
// the index lists without one (a blind entry, loaded from a record that
// holds none) the check embeds itself.

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/idem-dev/idem/ledger"
)

// landing holds the calls of wide scopes claimed in this process whose
// embedding has not landed yet (the index holds them once it has), by
// scope and tag. It is safe for concurrent use.
type landing struct {
	mu sync.Mutex                   // guards m
	m  map[string]map[*entry]coming // by landingKey
}

// coming is one such call, its session's view (whose lock guards the
// entry) and its session's ID.
type coming struct {
	e       *entry
	s       *session
	session string
}

func landingKey(name, tag string) string { return name + "\x00" + tag }

func (l *landing) add(name, tag string, c coming) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]map[*entry]coming{}
	}
	k := landingKey(name, tag)
	if l.m[k] == nil {
		l.m[k] = map[*entry]coming{}
	}
	l.m[k][c.e] = c
}

// done takes e out once it is in the index.
func (l *landing) done(name, tag string, e *entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := landingKey(name, tag)
	delete(l.m[k], e)
	if len(l.m[k]) == 0 {
		delete(l.m, k)
	}
}

// of lists the calls of name and tag still coming, made in sessions other
// than session, oldest first.
func (l *landing) of(name, tag, session string) []coming {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []coming
	for _, c := range l.m[landingKey(name, tag)] {
		if c.session != session {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b coming) int { return cmp.Compare(a.e.createdAt, b.e.createdAt) })
	return out
}

// embedBlind embeds the call of a wide scope's blind entry id (its record
// holds no embedding): in the check's budget, at the front of the encoder
// queue. The embedding goes into the index and to the record, so the next
// check finds it. nil, nil: the record is gone, is this session's, or has
// no text.
func (f *Funnel) embedBlind(ctx, bctx context.Context, c *check, name, tag, id string) ([][]float32, error) {
	got, ok, err := f.live(ctx, c, id)
	if err != nil {
		return nil, err
	}
	r := &got.Record
	if !ok || r.Status == ledger.StatusFailed {
		// Gone, or its effect did not happen: never a candidate again.
		if d, ok := f.scopes.(interface{ Delete(scope, id string) bool }); ok {
			d.Delete(name, id)
		}
		return nil, nil
	}
	if r.Session == c.req.Session {
		return nil, nil
	}
	earlier := f.earlierCall(c, r)
	if earlier == nil || !earlier.HasText() {
		return nil, nil
	}
	fl, err := f.submit(earlier.TextView(), true, c.deadline)
	if err != nil {
		return nil, err
	}
	vecs, err := fl.wait(bctx)
	if err != nil {
		return nil, err
	}
	f.addScope(name, tag, &entry{key: id, createdAt: r.CreatedAt}, vecs[0])
	f.queueWrite(write{tenant: c.req.Tenant, key: id, seq: r.Seq, hash: r.Hash, vec: slices.Concat(vecs...)})
	return vecs, nil
}

// awaitLanding returns the embedding of a wide-scope call still coming,
// waiting for it within bctx; when it is not being computed (its
// computation failed), it asks for it now. nil, nil: the call has no
// embedding to wait for (it was not found, or has no text any more).
func (f *Funnel) awaitLanding(ctx, bctx context.Context, c *check, l coming) ([][]float32, error) {
	l.s.mu.Lock()
	vecs, fl := l.e.vecs, l.e.fl
	l.s.mu.Unlock()
	if vecs != nil {
		return vecs, nil
	}
	if fl == nil {
		got, ok, err := f.live(ctx, c, l.e.key)
		if err != nil || !ok {
			return nil, err
		}
		earlier := f.earlierCall(c, &got.Record)
		if earlier == nil || !earlier.HasText() {
			return nil, nil
		}
		l.s.mu.Lock()
		fl, err = f.embedEntry(l.s, c.req.Tenant, l.e, earlier.TextView(), true, c.deadline)
		l.s.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return fl.wait(bctx)
}
