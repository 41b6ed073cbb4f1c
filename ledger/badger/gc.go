package badger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// heldDir, inside the database directory, holds hard links to the value
// logs a value-log GC pass may delete, until what it rewrote is durable.
// Badger rewrites a log's live values (a commit it does not sync, as the
// store opens it) and then deletes the log at once; without the links a
// power cut between the two could lose a value the log held. Open puts
// back any log that a pass deleted before the crash (its values are then
// found where they were).
const heldDir = "idem-gc-held"

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
			err := s.collect()
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

// collect runs one value-log GC pass; with sync writes, the logs it could
// delete are held until what it rewrote is durable.
func (s *Store) collect() error {
	if s.sync == nil {
		return s.db.RunValueLogGC(s.cfg.GCDiscardRatio)
	}
	held, err := holdValueLogs(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("holding the value logs: %w", err)
	}
	gcErr := s.db.RunValueLogGC(s.cfg.GCDiscardRatio)
	if gcErr == nil {
		s.sync.valueLogWrites.Add(1) // the rewrite went to the newest value log
		if err := s.sync.wait(); err != nil {
			return err // the links stay: Open puts back what the pass deleted
		}
	}
	if err := releaseHeld(s.cfg.Dir, held); err != nil {
		s.log.Warn("ledger/badger: releasing held value logs", "err", err)
	}
	return gcErr
}

// holdValueLogs hard-links every value log but the newest (the only ones
// GC picks) into heldDir, durably, and returns their names.
func holdValueLogs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var logs []logName
	for _, e := range entries {
		if l, ok := parseLogName(e.Name()); ok && l.vlog {
			logs = append(logs, l)
		}
	}
	if len(logs) < 2 {
		return nil, nil
	}
	slices.SortFunc(logs, func(a, b logName) int { return a.fid - b.fid })
	hold := filepath.Join(dir, heldDir)
	if err := os.MkdirAll(hold, 0o755); err != nil {
		return nil, err
	}
	var held []string
	for _, l := range logs[:len(logs)-1] {
		err := os.Link(filepath.Join(dir, l.name), filepath.Join(hold, l.name))
		if err != nil && !errors.Is(err, os.ErrExist) {
			return held, err
		}
		held = append(held, l.name)
	}
	if err := syncDir(hold); err != nil {
		return held, err
	}
	return held, syncDir(dir)
}

// releaseHeld removes the links of held.
func releaseHeld(dir string, held []string) error {
	var errs []error
	for _, name := range held {
		if err := os.Remove(filepath.Join(dir, heldDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restoreHeldValueLogs puts back, before Badger opens dir, the value logs a
// GC pass deleted before it knew its rewrite durable, and removes the
// other links.
func restoreHeldValueLogs(dir string, log *slog.Logger) error {
	hold := filepath.Join(dir, heldDir)
	entries, err := os.ReadDir(hold)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, os.ErrNotExist) {
			log.Warn("ledger/badger: putting back a value log that GC deleted before its rewrite was durable", "file", name)
			if err := os.Rename(filepath.Join(hold, name), filepath.Join(dir, name)); err != nil {
				return err
			}
			continue
		}
		if err := os.Remove(filepath.Join(hold, name)); err != nil {
			return err
		}
	}
	if err := syncDir(dir); err != nil {
		return err
	}
	return os.Remove(hold)
}
