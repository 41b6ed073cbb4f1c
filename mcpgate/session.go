package mcpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session is one MCP session: the client's connection, its upstream, and
// its tools/calls in flight.
type session struct {
	g      *Gateway
	id     string // the idem session
	client mcp.Connection
	up     *upstream
	steps  atomic.Int64
	ctx    context.Context // the session's; done when it ends
	done   chan struct{}   // closed when the session ends
	wg     sync.WaitGroup

	toolsOnce sync.Once // the first listing of the upstream's tools

	metaMu sync.Mutex                 // guards proto
	proto  map[string]json.RawMessage // the io.modelcontextprotocol/ keys of the client's latest _meta

	mu      sync.Mutex                        // guards calls, fresh, closing and wg.Add
	calls   map[jsonrpc.ID]context.CancelFunc // tools/calls being handled, by the client's ID
	fresh   map[string]struct{}               // keys of reads executed since the session's last write
	closing bool                              // no new goroutines
}

func (g *Gateway) serve(ctx context.Context, clientConn mcp.Connection, dial Dialer, id string) error {
	s := &session{
		g: g, id: id, client: clientConn, done: make(chan struct{}),
		calls: map[jsonrpc.ID]context.CancelFunc{}, fresh: map[string]struct{}{},
	}
	ctx, cancel := context.WithCancel(ctx)
	s.ctx = ctx
	s.up = newUpstream(dial, g.log.With("session", id), s.toClient)
	s.up.onListChanged = func() { s.spawn(s.fetchTools) }
	s.up.onRedial = func() { s.spawn(s.fetchTools) }
	defer func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		cancel()
		close(s.done)
		clientConn.Close()
		s.up.close()
		s.wg.Wait()
	}()
	// Start the upstream now: a command that does not exist fails at once.
	if _, err := s.up.live(ctx); err != nil {
		return err
	}
	g.log.Info("mcp session started", "session", id)
	for {
		msg, err := clientConn.Read(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				g.log.Info("mcp session ended", "session", id)
				return nil
			}
			return err
		}
		s.fromClient(ctx, msg)
	}
}

// fromClient routes one message of the client's.
func (s *session) fromClient(ctx context.Context, msg jsonrpc.Message) {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		s.keepProtocolMeta(m.Params)
		switch m.Method {
		case "tools/call":
			if m.IsCall() {
				s.startCall(ctx, m)
				return
			}
		case "initialize", "notifications/initialized":
			s.up.remember(m)
		case "notifications/cancelled":
			s.cancelled(m.Params)
		}
		if m.IsCall() {
			if err := s.up.relayCall(ctx, m); err != nil {
				s.g.log.Warn("relaying a request", "session", s.id, "method", m.Method, "err", err)
				s.toClient(ctx, &jsonrpc.Response{ID: m.ID, Error: &jsonrpc.Error{
					Code: jsonrpc.CodeInternalError, Message: "idem mcp: the upstream server is not available: " + err.Error(),
				}})
			}
			return
		}
		if err := s.up.relay(ctx, m, true); err != nil {
			s.g.log.Warn("relaying a notification", "session", s.id, "method", m.Method, "err", err)
		}
		if m.Method == "notifications/initialized" {
			s.spawn(s.ensureTools) // list the tools early; a tools/call waits for it
		}
	case *jsonrpc.Response:
		if err := s.up.relay(ctx, m, false); err != nil {
			s.g.log.Warn("relaying a response", "session", s.id, "err", err)
		}
	}
}

func (s *session) toClient(ctx context.Context, msg jsonrpc.Message) error {
	err := s.client.Write(ctx, msg)
	if err != nil {
		s.g.log.Debug("writing to the client", "session", s.id, "err", err)
	}
	return err
}

// spawn runs fn in a goroutine the session waits for, unless it is
// closing.
func (s *session) spawn(fn func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
	return true
}

// ensureTools lists the upstream's tools once per session (again on
// notifications/tools/list_changed and after a restart); callers wait for
// the first listing.
func (s *session) ensureTools() { s.toolsOnce.Do(s.fetchTools) }

// keepProtocolMeta keeps the protocol's per-request _meta keys
// (io.modelcontextprotocol/protocolVersion, clientInfo, capabilities) of
// the client's latest request: under the stateless protocol (2026-07-28)
// every request carries them, so the gateway's own requests do too.
func (s *session) keepProtocolMeta(params json.RawMessage) {
	if !bytes.Contains(params, []byte(protocolMetaPrefix)) {
		return
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	proto := map[string]json.RawMessage{}
	for k, v := range p.Meta {
		if strings.HasPrefix(k, protocolMetaPrefix) {
			proto[k] = v
		}
	}
	if len(proto) == 0 {
		return
	}
	s.metaMu.Lock()
	s.proto = proto
	s.metaMu.Unlock()
}

const protocolMetaPrefix = "io.modelcontextprotocol/"

// ownParams returns params for a request of the gateway's own, with the
// client's protocol _meta.
func (s *session) ownParams(params map[string]any) json.RawMessage {
	s.metaMu.Lock()
	proto := s.proto
	s.metaMu.Unlock()
	if len(proto) > 0 {
		params["_meta"] = proto
	}
	b, _ := marshal(params)
	return b
}

// startCall handles a tools/call in its own goroutine, cancelled when the
// client cancels the request.
func (s *session) startCall(ctx context.Context, req *jsonrpc.Request) {
	cctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.calls[req.ID] = cancel
	s.mu.Unlock()
	ok := s.spawn(func() {
		defer func() {
			s.mu.Lock()
			delete(s.calls, req.ID)
			s.mu.Unlock()
			cancel()
		}()
		s.call(cctx, req)
	})
	if !ok {
		cancel()
	}
}

// cancelled cancels the tools/call a notifications/cancelled names (the
// notification itself is relayed to the upstream as well).
func (s *session) cancelled(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	s.mu.Lock()
	cancel := s.calls[id]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// wrote notes an executed call: a read's key stays fresh until the next
// write in the session.
func (s *session) wrote(key string, readOnly bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if readOnly {
		s.fresh[key] = struct{}{}
		return
	}
	clear(s.fresh)
}

func (s *session) isFresh(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.fresh[key]
	return ok
}
