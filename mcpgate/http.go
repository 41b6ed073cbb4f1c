package mcpgate

import (
	"context"
	crand "crypto/rand"
	"net"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionHeader carries the MCP session of the streamable HTTP transport.
const sessionHeader = "Mcp-Session-Id"

// HTTPHandler serves MCP's streamable HTTP transport: each MCP session it
// opens (on an initialize without Mcp-Session-Id) is one gateway session
// with its own upstream connection, until the client deletes it or its
// connection fails. It is safe for concurrent use; Close ends every
// session.
//
// Known limits of relaying over the SDK's transports: notifications the
// upstream sends about a request in flight (progress) reach the client on
// its standalone GET stream rather than on that request's response
// stream, and notifications an HTTP upstream sends outside any request
// are not relayed (the SDK opens an upstream's standalone stream only for
// its own typed client).
type HTTPHandler struct {
	g    *Gateway
	dial Dialer
	ctx  context.Context
	stop context.CancelFunc

	mu       sync.Mutex // guards sessions, closed
	sessions map[string]*httpSession
	closed   bool
	wg       sync.WaitGroup
}

type httpSession struct {
	transport *mcp.StreamableServerTransport
	conn      mcp.Connection
}

// NewHTTPHandler returns a handler whose sessions reach the upstream
// through dial.
func (g *Gateway) NewHTTPHandler(dial Dialer) *HTTPHandler {
	ctx, stop := context.WithCancel(context.Background())
	return &HTTPHandler{g: g, dial: dial, ctx: ctx, stop: stop, sessions: map[string]*httpSession{}}
}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// DNS rebinding: a loopback listener answers loopback Host names only.
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(la.String()) && !isLoopback(r.Host) {
		http.Error(w, "Forbidden: invalid Host header", http.StatusForbidden)
		return
	}
	id := r.Header.Get(sessionHeader)
	if id == "" {
		if r.Method != http.MethodPost {
			http.Error(w, "Bad Request: "+r.Method+" needs an Mcp-Session-Id header", http.StatusBadRequest)
			return
		}
		s, err := h.open()
		if err != nil {
			http.Error(w, "Service Unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		s.transport.ServeHTTP(w, r)
		return
	}
	h.mu.Lock()
	s := h.sessions[id]
	h.mu.Unlock()
	if s == nil {
		http.Error(w, "Not Found: no such session", http.StatusNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodPost:
		s.transport.ServeHTTP(w, r)
	case http.MethodDelete:
		s.conn.Close() // its Serve returns and removes it
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// open starts a session.
func (h *HTTPHandler) open() (*httpSession, error) {
	id := crand.Text()
	t := &mcp.StreamableServerTransport{SessionID: id}
	conn, err := t.Connect(h.ctx)
	if err != nil {
		return nil, err
	}
	s := &httpSession{transport: t, conn: conn}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		conn.Close()
		return nil, http.ErrServerClosed
	}
	h.sessions[id] = s
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		sid := h.g.cfg.Session
		if sid == "" {
			sid = "mcp-" + id
		}
		if err := h.g.serve(h.ctx, conn, h.dial, sid); err != nil {
			h.g.log.Warn("mcp session", "session", sid, "err", err)
		}
		h.mu.Lock()
		delete(h.sessions, id)
		h.mu.Unlock()
	}()
	return s, nil
}

// Close ends every session and waits for them.
func (h *HTTPHandler) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.stop()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
