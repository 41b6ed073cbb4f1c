package ledger

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWatchers(t *testing.T) {
	var w Watchers
	a, stopA := w.Watch("k")
	b, stopB := w.Watch("k")
	other, stopOther := w.Watch("other")
	w.Wake("k")
	if !closed(a) || !closed(b) {
		t.Error("Wake did not release both watchers of the key")
	}
	if closed(other) {
		t.Error("Wake released another key's watcher")
	}
	stopA()
	stopA() // stop is idempotent
	stopB()
	// A watch after the wake waits for the next one.
	c, stopC := w.Watch("k")
	if closed(c) {
		t.Error("a new watch began closed")
	}
	w.WakeAll()
	if !closed(c) || !closed(other) {
		t.Error("WakeAll did not release every watcher")
	}
	stopC()
	stopOther()
	if len(w.m) != 0 {
		t.Errorf("%d keys still registered after every stop", len(w.m))
	}
	// A stopped, never-woken watch is forgotten too.
	_, stopD := w.Watch("d")
	stopD()
	if len(w.m) != 0 {
		t.Errorf("a stopped watch stayed registered")
	}
}
