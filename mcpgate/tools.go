package mcpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/idem-dev/idem/canon"
)

// toolSet is what the gateway knows of the upstream's tools. It is safe
// for concurrent use.
type toolSet struct {
	mu   sync.Mutex // guards hash, defs
	hash uint64     // of the last list handed to the backend
	defs map[string]canon.Tool
}

func newToolSet() *toolSet { return &toolSet{defs: map[string]canon.Tool{}} }

// readOnly reports whether the upstream annotated tool readOnlyHint true.
func (t *toolSet) readOnly(tool string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.defs[tool]
	return ok && d.ReadOnly != nil && *d.ReadOnly
}

// set reads the tools of a tools/list answer (all pages, in order) and,
// when they differ from the last list, hands them to b.
func (t *toolSet) set(b Backend, tools []json.RawMessage) error {
	raw, err := json.Marshal(tools)
	if err != nil {
		return err
	}
	h := xxhash.Sum64(raw)
	t.mu.Lock()
	defer t.mu.Unlock()
	if h == t.hash && len(t.defs) > 0 {
		return nil
	}
	defs := []canon.Tool{}
	if len(tools) > 0 {
		if defs, err = canon.ParseTools(raw); err != nil {
			return fmt.Errorf("the upstream's tool list: %w", err)
		}
	}
	if err := b.SetTools(defs); err != nil {
		return fmt.Errorf("the upstream's tool definitions: %w", err)
	}
	t.hash = h
	t.defs = make(map[string]canon.Tool, len(defs))
	for _, d := range defs {
		t.defs[d.Name] = d
	}
	return nil
}

// listPage is one page of a tools/list answer.
type listPage struct {
	Tools      []json.RawMessage `json:"tools"`
	NextCursor string            `json:"nextCursor"`
}

// maxToolPages bounds the pages read of one listing (an upstream whose
// cursors never end).
const maxToolPages = 100

// fetchTools lists the upstream's tools on up (every page) and hands them
// to the backend.
func (s *session) fetchTools() {
	g, ctx := s.g, s.ctx
	var all []json.RawMessage
	cursor := ""
	for range maxToolPages {
		p := map[string]any{}
		if cursor != "" {
			p["cursor"] = cursor
		}
		cctx, cancel := context.WithTimeout(ctx, g.cfg.ToolsTimeout)
		resp, err := s.up.request(cctx, "tools/list", s.ownParams(p))
		cancel()
		if err != nil {
			g.log.Warn("listing the upstream's tools", "session", s.id, "err", err)
			return
		}
		var page listPage
		if resp.Error != nil {
			g.log.Warn("listing the upstream's tools", "session", s.id, "err", resp.Error)
			return
		}
		if err := json.Unmarshal(resp.Result, &page); err != nil {
			g.log.Warn("the upstream's tools/list answer is not a list", "session", s.id, "err", err)
			return
		}
		all = append(all, page.Tools...)
		if page.NextCursor == "" || page.NextCursor == cursor {
			break
		}
		cursor = page.NextCursor
	}
	if err := g.tools.set(g.backend, all); err != nil {
		g.log.Warn("tool definitions not used", "session", s.id, "err", err)
		return
	}
	g.log.Debug("upstream tools known", "session", s.id, "tools", len(all))
}

// isNull reports a JSON null or nothing.
func isNull(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || bytes.Equal(b, []byte("null"))
}
