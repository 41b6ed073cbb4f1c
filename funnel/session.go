package funnel

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/ledger"
)

// textState is what the funnel knows of whether a call has text fields.
type textState uint8

const (
	// textUnknown: a record listed without an embedding: a call without
	// text, or one whose embedding was never written (its claimant
	// crashed, or lost the race to write it). Resolved when it matters,
	// by reading the record's call back.
	textUnknown textState = iota
	textNone
	textSome
)

// entry is what the funnel keeps of one ledger record of a session. The
// key, hashes and numbers never change after the claim (status is always
// read afresh from the ledger); text, vecs and fl are guarded by the
// session's mu.
type entry struct {
	key, base, tool string
	hash, identity  uint64
	// shape is the call's canon.Call ShapeDigest, when read is set (the
	// call was canonicalized here).
	shape     uint64
	read      bool
	seq       uint64
	createdAt int64

	text textState
	// qv is the call's text embedding by the funnel's model, quantized
	// for screening, once known; vecs the exact vectors while its record
	// does not hold them yet (computed here, being written); fl the
	// embedding being computed, or nil.
	qv   *qvec
	vecs [][]float32
	fl   *flight
	// leaves are the call's identity leaves, once a check graded it.
	leaves *canon.IdentityLeaves
	// session is the call's session, for a call found in a wider scope
	// ("" for the view's own); wide and wideTag the wider scope and tag
	// its embedding joins once known (see scopes.go).
	session, wide, wideTag string
	// bytes is what its view is charged for it (see resize).
	bytes int
}

// entryBytes is what an entry holds beyond its key, vectors and leaves:
// the struct, its tool's share, and its places in the view's maps and
// slices (TestViewBytesEstimate checks it against the heap).
const entryBytes = 504

// size is about how much memory e holds in its view.
func (e *entry) size() int {
	n := entryBytes + len(e.key) + len(e.session)
	if e.qv != nil {
		n += e.qv.bytes()
	}
	for _, v := range e.vecs {
		n += 24 + 4*cap(v)
	}
	if e.leaves != nil {
		n += e.leaves.Bytes()
	}
	return n
}

// identKey finds the calls of a tool with equal identity fields.
type identKey struct {
	tool     string
	identity uint64
}

// session is the funnel's view of one (tenant, session): a cache of the
// ledger's session listing. It is loaded once, off the request path, and
// brought up to date before every check. It answers the stages' questions
// (Exact, Gated, OfTool, Since) without exposing its maps.
type session struct {
	// mu guards every field below and the mutable fields of its entries.
	// A check holds it while it refreshes, and again while it re-checks
	// and claims, so that two checks of one session in this process
	// always see each other's claims.
	mu sync.Mutex
	// loaded: the view holds every live record of the session up to
	// lastSeq. loading is closed when the load running ends (nil when
	// none runs); loadErr is the last load's error.
	loaded  bool
	loading chan struct{}
	loadErr error
	lastSeq uint64 // the newest Seq the ledger's listing brought
	// covered is the session counter's value up to which the view holds
	// every live record: lastSeq, or more once a refused fence has told of
	// numbers that no live record holds (forgotten or expired records,
	// numbers taken by lost writes). A fenced claim is fenced on it.
	covered    uint64
	byKey      map[string]*entry
	byHash     map[uint64][]*entry
	byIdentity map[identKey][]*entry
	byShape    map[identKey][]*entry // by tool and ShapeDigest (entries read only)
	byTool     map[string][]*entry
	order      []*entry // arrival order
	// acct is what the view charges to the bound on all views' bytes.
	acct account
}

// account holds a view's share of the bound on all views' memory
// (Config.MaxViewBytes): the sum of its entries' sizes, charged to the
// views' total while the view is held. Its own mutex is held for a few
// instructions only, never with another lock taken after it, so a view
// is dropped without waiting for its checks.
type account struct {
	mu    sync.Mutex
	bytes int64
	total *atomic.Int64 // the views' total, nil when the view is not held
}

// charge adds d bytes to the view's size, and to the total while held.
func (a *account) charge(d int64) {
	a.mu.Lock()
	a.bytes += d
	if a.total != nil {
		a.total.Add(d)
	}
	a.mu.Unlock()
}

// attach charges the view's size to total from now on.
func (a *account) attach(total *atomic.Int64) {
	a.mu.Lock()
	a.total = total
	total.Add(a.bytes)
	a.mu.Unlock()
}

// detach takes the view's size off the total: the view is dropped (a
// check that still holds it goes on with it, uncharged).
func (a *account) detach() {
	a.mu.Lock()
	if a.total != nil {
		a.total.Add(-a.bytes)
		a.total = nil
	}
	a.mu.Unlock()
}

// size is the view's size in bytes.
func (a *account) size() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bytes
}

// resize charges e's view for what e holds now. The caller holds s.mu
// and calls it after every change to e's vectors or leaves. An entry no
// longer in the view (replaced by a new claim of its key, or the view
// reset) is not charged: an embedding landing late changes nothing.
func (s *session) resize(e *entry) {
	if s.byKey[e.key] != e {
		return
	}
	n := e.size()
	if d := n - e.bytes; d != 0 {
		e.bytes = n
		s.acct.charge(int64(d))
	}
}

// forget takes e off its view's size (e has left the view). The caller
// holds s.mu.
func (s *session) forget(e *entry) {
	s.acct.charge(-int64(e.bytes))
	e.bytes = 0
}

func newSession() *session {
	return &session{
		byKey: map[string]*entry{}, byHash: map[uint64][]*entry{},
		byIdentity: map[identKey][]*entry{}, byShape: map[identKey][]*entry{}, byTool: map[string][]*entry{},
	}
}

// reset empties the view, for a session whose numbering restarted (all its
// records and its counter expired): the next load lists it anew.
func (s *session) reset() {
	s.loaded, s.lastSeq, s.covered = false, 0, 0
	for _, e := range s.byKey {
		s.forget(e)
	}
	clear(s.byKey)
	clear(s.byHash)
	clear(s.byIdentity)
	clear(s.byShape)
	clear(s.byTool)
	s.order = nil
}

// Exact returns the calls with canonical hash h (which covers the tool),
// in arrival order.
func (s *session) Exact(h uint64) []*entry { return s.byHash[h] }

// Gated returns the calls of tool whose identity fields equal identity:
// the candidates that pass the identity gate, in arrival order.
func (s *session) Gated(tool string, identity uint64) []*entry {
	return s.byIdentity[identKey{tool, identity}]
}

// Shaped returns the calls of tool whose identity fields have the paths of
// shape (canon.Call.ShapeDigest): the calls whose identity values may
// restate the call's, in arrival order.
func (s *session) Shaped(tool string, shape uint64) []*entry {
	return s.byShape[identKey{tool, shape}]
}

// OfTool returns the calls of tool, in arrival order.
func (s *session) OfTool(tool string) []*entry { return s.byTool[tool] }

// Since returns the calls that arrived after Seq seq.
func (s *session) Since(seq uint64) []*entry {
	i := len(s.order)
	for i > 0 && s.order[i-1].seq > seq {
		i--
	}
	return s.order[i:]
}

// Newest is the highest Seq the view holds: every call up to it is in the
// view (listed, or claimed by this process).
func (s *session) Newest() uint64 {
	n := s.lastSeq
	if len(s.order) > 0 {
		n = max(n, s.order[len(s.order)-1].seq)
	}
	return n
}

// add records e. A key held with the same Seq keeps the entry it has (it
// may know more: an embedding in flight); a key seen with another Seq is
// replaced (a FAILED transient key claimed again gets a new Seq).
func (s *session) add(e *entry) *entry {
	if old, ok := s.byKey[e.key]; ok {
		if old.seq == e.seq {
			if old.qv == nil && e.qv != nil {
				old.qv, old.text = e.qv, textSome
				s.resize(old)
			}
			return old
		}
		s.forget(old)
		s.byHash[old.hash] = without(s.byHash[old.hash], old)
		ik := identKey{old.tool, old.identity}
		s.byIdentity[ik] = without(s.byIdentity[ik], old)
		if old.read {
			sk := identKey{old.tool, old.shape}
			s.byShape[sk] = without(s.byShape[sk], old)
		}
		s.byTool[old.tool] = without(s.byTool[old.tool], old)
		s.order = without(s.order, old)
	}
	if same := s.byTool[e.tool]; len(same) > 0 {
		e.tool = same[0].tool // one copy of the tool's name per view
	}
	s.byKey[e.key] = e
	s.byHash[e.hash] = append(s.byHash[e.hash], e)
	ik := identKey{e.tool, e.identity}
	s.byIdentity[ik] = append(s.byIdentity[ik], e)
	if e.read {
		sk := identKey{e.tool, e.shape}
		s.byShape[sk] = append(s.byShape[sk], e)
	}
	s.byTool[e.tool] = append(s.byTool[e.tool], e)
	// Arrival order: a claim of this process may be added before a
	// listing brings an earlier Seq.
	i := len(s.order)
	for i > 0 && s.order[i-1].seq > e.seq {
		i--
	}
	s.order = append(s.order, nil)
	copy(s.order[i+1:], s.order[i:])
	s.order[i] = e
	s.resize(e)
	return e
}

func without[T comparable](xs []T, x T) []T {
	for i, y := range xs {
		if y == x {
			return append(xs[:i:i], xs[i+1:]...)
		}
	}
	return xs
}

// entryOf turns a ledger record into a session entry, with its embedding
// (quantized: the record keeps it exactly) when it holds one by model.
func entryOf(r *ledger.Record, model string, dim int) *entry {
	e := &entry{
		key: r.Key, base: baseKey(r.Key), tool: r.Tool, hash: r.Hash, identity: r.Identity,
		seq: r.Seq, createdAt: r.CreatedAt,
	}
	if r.EmbeddingModel == model {
		if w := windowsOf(r.Embedding, dim); len(w) > 0 {
			e.qv, e.text = quantize(w), textSome
		}
	}
	return e
}

// read canonicalizes a listed record's call to learn what the record does
// not keep: whether it has text, its shape digest. A call that
// no longer canonicalizes (the tools' config changed) is left unread.
func (f *Funnel) read(e *entry, r *ledger.Record) {
	call, err := f.canon.Canonicalize(r.Tool, r.Canonical)
	if err != nil {
		return
	}
	e.shape, e.read = call.ShapeDigest, true
	if e.text == textUnknown {
		e.text = textNone
		if call.HasText() {
			e.text = textSome
		}
	}
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

// sessions holds the session views, least recently used first out: past
// max views, or past maxBytes of them in all (the sizes their entries
// are estimated at). The view a check asks for is always held, even when
// it alone is over maxBytes.
type sessions struct {
	mu       sync.Mutex // guards m and lru
	m        map[string]*list.Element
	lru      *list.List // of *sessionSlot, most recent at the front
	max      int
	maxBytes int64
	bytes    atomic.Int64 // the held views' sizes
	dropped  atomic.Int64 // views dropped to keep within the bounds
}

type sessionSlot struct {
	scope string
	s     *session
}

func newSessions(max int, maxBytes int64) *sessions {
	return &sessions{m: map[string]*list.Element{}, lru: list.New(), max: max, maxBytes: maxBytes}
}

// get returns the view of scope, creating it (empty, not loaded) if needed.
func (ss *sessions) get(scope string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if el, ok := ss.m[scope]; ok {
		ss.lru.MoveToFront(el)
		ss.trim() // the views may have grown since
		return el.Value.(*sessionSlot).s
	}
	s := ss.add(scope, true)
	ss.trim()
	return s
}

// add holds a new, empty view of scope: the most recently used, or with
// recent false the least (a view warmed). The caller holds ss.mu.
func (ss *sessions) add(scope string, recent bool) *session {
	s := newSession()
	s.acct.attach(&ss.bytes)
	slot := &sessionSlot{scope: scope, s: s}
	if recent {
		ss.m[scope] = ss.lru.PushFront(slot)
	} else {
		ss.m[scope] = ss.lru.PushBack(slot)
	}
	return s
}

// ViewStats is what the session views hold.
type ViewStats struct {
	Views int // session views held
	// Bytes is their memory as their entries are estimated (bounded by
	// Config.MaxViewBytes).
	Bytes int64
	// Dropped counts the views dropped to keep within MaxSessions and
	// MaxViewBytes since the funnel started (each is loaded again from
	// the ledger when its session is next checked).
	Dropped int64
}

// ViewStats reports what the session views hold now.
func (f *Funnel) ViewStats() ViewStats {
	ss := f.sessions
	ss.mu.Lock()
	n := ss.lru.Len()
	ss.mu.Unlock()
	return ViewStats{Views: n, Bytes: ss.bytes.Load(), Dropped: ss.dropped.Load()}
}

// warmView returns a new view of scope to warm, placed behind every view
// held (warming goes from the most recently active session down, so each
// is less recent than those before it); nil when scope is held already,
// or, with full, when the views are at a bound: a view warmed past it
// would push out a more recent one.
func (ss *sessions) warmView(scope string) (s *session, full bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if _, ok := ss.m[scope]; ok {
		return nil, false
	}
	if ss.lru.Len() >= ss.max || ss.bytes.Load() >= ss.maxBytes {
		return nil, true
	}
	return ss.add(scope, false), false
}

// trim drops the least recently used views past the bounds, never the
// most recent one. The caller holds ss.mu.
func (ss *sessions) trim() {
	for ss.lru.Len() > ss.max || ss.lru.Len() > 1 && ss.bytes.Load() > ss.maxBytes {
		last := ss.lru.Back()
		ss.lru.Remove(last)
		slot := last.Value.(*sessionSlot)
		delete(ss.m, slot.scope)
		slot.s.acct.detach()
		ss.dropped.Add(1)
	}
}

// loadPage is how many records a load reads at a time; the view's lock is
// released between pages.
const loadPage = 1024

// errLoading: the session's view was still being loaded from the ledger
// when the check's budget ran out.
var errLoading = errors.New("funnel: session still loading")

// ready makes sure s is loaded. The check that finds it unloaded reads the
// first page of the session itself (a bounded cost, whatever the machine:
// a new or small session is then ready at once); a longer session's
// remaining pages are read off the request path, by a goroutine of the
// funnel's, and every check of the session waits for them until its ctx
// (the budget) ends, then gets errLoading; the load goes on for the next.
// It returns the load's error when the ledger failed.
func (f *Funnel) ready(ctx, bctx context.Context, s *session, tenant, sess string) error {
	for {
		s.mu.Lock()
		if s.loaded {
			s.mu.Unlock()
			return nil
		}
		ch := s.loading
		if ch == nil {
			ch = make(chan struct{})
			s.loading = ch
			s.mu.Unlock()
			if more := f.loadPage(ctx, s, tenant, sess, ch); more {
				f.pending.add(1)
				if !f.spawn(func(octx context.Context) {
					defer f.pending.add(-1)
					f.load(octx, s, tenant, sess, ch)
				}) {
					f.pending.add(-1)
					f.loaded(s, ch, errClosed, tenant)
				}
			}
		} else {
			s.mu.Unlock()
		}
		select {
		case <-ch:
		case <-bctx.Done():
		}
		s.mu.Lock()
		loaded, err, loading := s.loaded, s.loadErr, s.loading == ch
		s.mu.Unlock()
		switch {
		case loaded:
			return nil // loaded, even if the budget ran out meanwhile
		case ctx.Err() != nil:
			return ctx.Err()
		case loading:
			return errLoading // still loading when the budget ran out
		}
		// A load that failed on its own check's context is not this
		// check's failure: load again.
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
	}
}

// loadPage reads the next page of the session into s and reports whether
// more remain; when none do, or the ledger failed, it ends the load.
func (f *Funnel) loadPage(ctx context.Context, s *session, tenant, sess string, done chan struct{}) (more bool) {
	s.mu.Lock()
	after := s.lastSeq
	s.mu.Unlock()
	recs, err := f.ledger.Session(ctx, tenant, sess, after, loadPage)
	if err == nil {
		s.mu.Lock()
		f.apply(s, recs)
		s.mu.Unlock()
		if len(recs) == loadPage {
			return true
		}
	}
	f.loaded(s, done, err, tenant)
	return false
}

// load reads the rest of the session, page by page.
func (f *Funnel) load(ctx context.Context, s *session, tenant, sess string, done chan struct{}) {
	for f.loadPage(ctx, s, tenant, sess, done) {
	}
}

// loaded ends a load with err.
func (f *Funnel) loaded(s *session, done chan struct{}, err error, tenant string) {
	s.mu.Lock()
	s.loaded, s.loadErr, s.loading = err == nil, err, nil
	s.mu.Unlock()
	close(done)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, errClosed) {
		f.log.Warn("funnel: loading a session from the ledger", "tenant", tenant, "err", err)
	}
}

// refresh brings a loaded s up to date with the ledger. The caller holds
// s.mu.
func (f *Funnel) refresh(ctx context.Context, s *session, tenant, sess string) error {
	recs, err := f.ledger.Session(ctx, tenant, sess, s.lastSeq, 0)
	if err != nil {
		return err
	}
	f.apply(s, recs)
	return nil
}

// claimed tells the view that a fenced claim of its own, now in the view,
// took Seq seq. When seq is the number after every number the view
// covers, no other call can hold a number below it that the view lacks
// (the fence saw the counter at s.covered), so the view covers seq too and
// the next refresh does not list the claim back. The caller holds s.mu.
func (s *session) claimed(seq uint64) {
	if seq == s.covered+1 {
		s.lastSeq, s.covered = max(s.lastSeq, seq), seq
	}
}

// apply adds listed records to s. The caller holds s.mu.
func (f *Funnel) apply(s *session, recs []ledger.Record) {
	for i := range recs {
		r := &recs[i]
		if old, ok := s.byKey[r.Key]; !ok || old.seq != r.Seq {
			e := entryOf(r, f.model, f.dim)
			f.read(e, r)
			s.add(e)
		} else if old.qv == nil {
			s.add(entryOf(r, f.model, f.dim)) // the record may hold the embedding now
		}
		// Only the listing moves lastSeq: a claim of this process may
		// commit after another replica's, and the listing must still
		// bring that one.
		s.lastSeq = max(s.lastSeq, r.Seq)
		s.covered = max(s.covered, s.lastSeq)
	}
}

// warm loads the most recently active sessions, one at a time, so that
// the first checks after a start find their views ready; it stops at the
// views' bounds (the sessions not warmed are the least recent).
func (f *Funnel) warm(ctx context.Context) {
	refs, err := f.ledger.RecentSessions(ctx, f.cfg.WarmSessions)
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) && ctx.Err() == nil {
			f.log.Warn("funnel: listing recent sessions to warm", "err", err)
		}
		return
	}
	for i, r := range refs {
		if ctx.Err() != nil {
			return
		}
		s, full := f.sessions.warmView(Scope(r.Tenant, r.Session))
		if full {
			f.log.Info("funnel: warming stopped: the session views are at their bound", "warmed", i, "of", len(refs))
			return
		}
		if s == nil {
			continue // a check loaded it already
		}
		if err := f.ready(ctx, ctx, s, r.Tenant, r.Session); err != nil && ctx.Err() == nil {
			f.log.Warn("funnel: warming a session", "tenant", r.Tenant, "err", err)
		}
	}
}
