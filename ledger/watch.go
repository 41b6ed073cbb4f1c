package ledger

import "sync"

// Watchers is the in-process half of Store.Watch that every backend shares:
// one channel per watched key, closed by Wake (the key changed) or WakeAll
// (changes may have been missed), and forgotten when its last watcher
// stops. The zero value is ready; it is safe for concurrent use.
type Watchers struct {
	mu sync.Mutex // guards m
	m  map[string]*watch
}

type watch struct {
	ch chan struct{}
	n  int // Watch calls not yet stopped
}

// Watch returns the channel closed at key's next Wake (or WakeAll) and the
// stop function that releases it; stop must be called exactly once.
func (w *Watchers) Watch(key string) (<-chan struct{}, func()) {
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[string]*watch)
	}
	x := w.m[key]
	if x == nil {
		x = &watch{ch: make(chan struct{})}
		w.m[key] = x
	}
	x.n++
	w.mu.Unlock()
	var once sync.Once
	return x.ch, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			x.n--
			if x.n == 0 && w.m[key] == x {
				delete(w.m, key)
			}
		})
	}
}

// Wake releases the watchers of key.
func (w *Watchers) Wake(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := w.m[key]; x != nil {
		close(x.ch)
		delete(w.m, key)
	}
}

// WakeAll releases every watcher: they re-read what they wait on.
func (w *Watchers) WakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, x := range w.m {
		close(x.ch)
		delete(w.m, key)
	}
}
