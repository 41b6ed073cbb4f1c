package funnel

import (
	"container/list"
	"context"
	"fmt"
	"github.com/idem-dev/idem/index"
	"strings"
	"sync"

	"github.com/idem-dev/idem/ledger"
)

// entry is what the funnel keeps of one ledger record of a session: the
// parts that never change after the claim (status is always read afresh
// from the ledger).
type entry struct {
	key, base, tool string
	hash, identity  uint64
	// text: the record holds an embedding of its text view (by model);
	// the vectors themselves stay in the ledger and the index, and are read
	// from the record when the call is compared.
	text      bool
	model     string
	seq       uint64
	createdAt int64
}

// session is the funnel's view of one (tenant, session): a cache of the
// ledger's session listing, brought up to date before every check.
type session struct {
	// mu guards every field below. A check holds it while it refreshes,
	// and again while it re-checks and claims, so that two checks of one
	// session in this process always see each other's claims.
	mu      sync.Mutex
	loaded  bool
	lastSeq uint64 // the newest Seq the ledger's listing brought
	// covered is the session counter's value up to which the view holds
	// every live record: lastSeq, or more once a refused fence has told of
	// numbers that no live record holds (forgotten or expired records,
	// numbers taken by lost writes). A fenced claim is fenced on it.
	covered uint64
	byKey   map[string]*entry
	byHash  map[uint64][]*entry
	byTool  map[string][]*entry
	order   []*entry // arrival order
}

func newSession() *session {
	return &session{byKey: map[string]*entry{}, byHash: map[uint64][]*entry{}, byTool: map[string][]*entry{}}
}

// reset empties the view, for a session whose numbering restarted (all its
// records and its counter expired): the next refresh lists it anew.
func (s *session) reset() {
	s.loaded, s.lastSeq, s.covered = false, 0, 0
	clear(s.byKey)
	clear(s.byHash)
	clear(s.byTool)
	s.order = nil
}

// add records e; a key seen before is replaced (a FAILED transient key
// claimed again gets a new Seq).
func (s *session) add(e *entry) {
	if old, ok := s.byKey[e.key]; ok {
		s.byHash[old.hash] = without(s.byHash[old.hash], old)
		s.byTool[old.tool] = without(s.byTool[old.tool], old)
		s.order = without(s.order, old)
	}
	s.byKey[e.key] = e
	s.byHash[e.hash] = append(s.byHash[e.hash], e)
	s.byTool[e.tool] = append(s.byTool[e.tool], e)
	s.order = append(s.order, e)
}

func without(es []*entry, e *entry) []*entry {
	for i, x := range es {
		if x == e {
			return append(es[:i:i], es[i+1:]...)
		}
	}
	return es
}

// since returns the entries that arrived after Seq seq (s.order is in
// arrival order, so they are at its end).
func (s *session) since(seq uint64) []*entry {
	i := len(s.order)
	for i > 0 && s.order[i-1].seq > seq {
		i--
	}
	return s.order[i:]
}

// entryOf turns a ledger record into a session entry.
func entryOf(r *ledger.Record, dim int) *entry {
	e := &entry{
		key: r.Key, base: baseKey(r.Key), tool: r.Tool, hash: r.Hash, identity: r.Identity,
		model: r.EmbeddingModel, seq: r.Seq, createdAt: r.CreatedAt,
	}
	e.text = len(windowsOf(r.Embedding, dim)) > 0
	return e
}

// windowsOf splits a record's embedding into its windows of dim values;
// nil when it holds none (or not a whole number of them).
func windowsOf(emb []float32, dim int) [][]float32 {
	if dim <= 0 || len(emb) < dim || len(emb)%dim != 0 {
		return nil
	}
	w := make([][]float32, 0, len(emb)/dim)
	for i := 0; i < len(emb); i += dim {
		w = append(w, emb[i:i+dim:i+dim])
	}
	return w
}

// baseKey strips a sampling retry's derived suffix (#s<n> or #e<hex>).
func baseKey(key string) string { return ledger.BaseKey(key) }

// sessions holds the session views, least recently used first out.
type sessions struct {
	mu  sync.Mutex // guards m and lru
	m   map[string]*list.Element
	lru *list.List // of *sessionSlot, most recent at the front
	max int
}

type sessionSlot struct {
	scope string
	s     *session
}

func newSessions(max int) *sessions {
	return &sessions{m: map[string]*list.Element{}, lru: list.New(), max: max}
}

// get returns the view of scope, creating it (empty, not loaded) if needed.
func (ss *sessions) get(scope string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if el, ok := ss.m[scope]; ok {
		ss.lru.MoveToFront(el)
		return el.Value.(*sessionSlot).s
	}
	s := newSession()
	ss.m[scope] = ss.lru.PushFront(&sessionSlot{scope: scope, s: s})
	for ss.lru.Len() > ss.max {
		last := ss.lru.Back()
		ss.lru.Remove(last)
		delete(ss.m, last.Value.(*sessionSlot).scope)
	}
	return s
}

// refresh brings s up to date with the ledger. The caller holds s.mu.
func (f *Funnel) refresh(ctx context.Context, s *session, tenant, sess, scope string) ([]*entry, error) {
	recs, err := f.ledger.Session(ctx, tenant, sess, s.lastSeq, 0)
	if err != nil {
		return nil, err
	}
	s.loaded = true
	added := make([]*entry, 0, len(recs))
	var vecs []index.Entry
	for i := range recs {
		r := &recs[i]
		e := entryOf(r, f.dim)
		s.add(e)
		// Only the listing moves lastSeq: a claim of this process may
		// commit after another replica's, and the listing must still
		// bring that one.
		s.lastSeq = max(s.lastSeq, r.Seq)
		s.covered = max(s.covered, s.lastSeq)
		added = append(added, e)
		if f.index != nil && e.text && e.model == f.embedder.Name() {
			vecs = append(vecs, index.Entry{ID: e.key, Tag: e.tool, Seq: e.seq, Vector: r.Embedding[:f.dim]})
		}
	}
	f.indexAdd(scope, vecs)
	return added, nil
}

// IndexLoader returns the index.Loader that rebuilds a scope (tenant and
// session, as Scope joins them) from the ledger's session listing: the first
// window of each call's text embedding by the named model, tagged with the
// tool.
func IndexLoader(l Ledger, model string, dim int) index.Loader {
	return index.LoaderFunc(func(ctx context.Context, scope string, after uint64) ([]index.Entry, uint64, error) {
		tenant, sess, ok := strings.Cut(scope, "\x00")
		if !ok {
			return nil, 0, fmt.Errorf("funnel: malformed scope %q", scope)
		}
		recs, err := l.Session(ctx, tenant, sess, after, 0)
		if err != nil {
			return nil, 0, err
		}
		through := after
		out := make([]index.Entry, 0, len(recs))
		for i := range recs {
			r := &recs[i]
			through = max(through, r.Seq)
			if r.EmbeddingModel != model || len(r.Embedding) < dim {
				continue
			}
			out = append(out, index.Entry{ID: r.Key, Tag: r.Tool, Seq: r.Seq, Vector: r.Embedding[:dim]})
		}
		return out, through, nil
	})
}
