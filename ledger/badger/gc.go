package badger

import (
	"context"
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// gcLoop runs Badger's value-log GC every GCInterval, for value logs
// written by earlier versions of the store: this one writes none (every
// value stays in the write-ahead log, see pieces.go). It runs only with
// SyncWrites off. With it on, it would be unsafe: a GC pass rewrites the
// values it keeps into the newest value log, without an fsync (the store
// opens Badger without SyncWrites), and deletes the old log at once, so a
// power cut could find a pointer to a rewritten value that never reached
// the disk. (A value log that is the newest, as the only one is, is never
// collected anyway.)
func (s *Store) gcLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rewrites := 0
		for ctx.Err() == nil {
			err := s.db.RunValueLogGC(s.cfg.GCDiscardRatio)
			if err == nil {
				rewrites++
				continue
			}
			if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
				s.log.Warn("ledger/badger: value log GC", "err", err)
			}
			break
		}
		if rewrites > 0 {
			s.log.Debug("ledger/badger: value log GC", "rewritten_files", rewrites)
		}
	}
}
