package load

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Anchor is the yardstick idem's HTTP numbers are read against: a minimal
// Redis-backed check over the same API. A check decodes the body, takes
// the positional key (workflow:step:tool) and claims it with SET NX (and
// a lease); a key already held is read back with GET and answered as
// duplicate or in_progress. A completion is one SET of the result. Run
// Redis with appendonly yes and appendfsync always, and every answer waits
// for its write's fsync, as idem's do with sync writes.
//
// It is safe for concurrent use: it keeps a pool of Redis connections,
// one per request in flight.
type Anchor struct {
	addr  string
	lease time.Duration
	pool  chan *redisConn // idle connections
	mu    sync.Mutex      // guards closed
	// closed is set by Close; connections returned after it are closed.
	closed bool
}

// NewAnchor returns an Anchor over the Redis at addr (host:port), keeping
// up to maxIdle idle connections, after checking that Redis answers.
func NewAnchor(addr string, maxIdle int) (*Anchor, error) {
	if maxIdle < 1 {
		return nil, fmt.Errorf("anchor: maxIdle must be at least 1, got %d", maxIdle)
	}
	a := &Anchor{addr: addr, lease: 5 * time.Minute, pool: make(chan *redisConn, maxIdle)}
	if _, err := a.do([]byte("PING")); err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	return a, nil
}

// Close closes the idle connections.
func (a *Anchor) Close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	for {
		select {
		case c := <-a.pool:
			c.close()
		default:
			return
		}
	}
}

func (a *Anchor) do(args ...[]byte) ([]byte, error) {
	var c *redisConn
	select {
	case c = <-a.pool:
	default:
		var err error
		if c, err = dialRedis(a.addr, 5*time.Second); err != nil {
			return nil, err
		}
	}
	reply, err := c.do(args...)
	if err != nil && !errors.Is(err, errNil) && !isRedisError(err) {
		c.close() // the connection's state is unknown
		return nil, err
	}
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		c.close()
		return reply, err
	}
	select {
	case a.pool <- c:
	default:
		c.close()
	}
	return reply, err
}

// isRedisError reports an error reply of Redis (the connection is fine).
func isRedisError(err error) bool {
	var re redisReplyError
	return errors.As(err, &re)
}

type redisReplyError struct{ msg string }

func (e redisReplyError) Error() string { return "redis: " + e.msg }

// Handler serves POST /v1/check and POST /v1/complete.
func (a *Anchor) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/check", a.check)
	mux.HandleFunc("POST /v1/complete", a.complete)
	return mux
}

type anchorCheck struct {
	SessionID  string          `json:"session_id"`
	WorkflowID string          `json:"workflow_id"`
	StepID     string          `json:"step_id"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments"`
}

// The stored value: 'P' and the token for a claim, 'S' and the result
// for a completion.
const (
	pendingMark = 'P'
	successMark = 'S'
)

func (a *Anchor) check(w http.ResponseWriter, r *http.Request) {
	var req anchorCheck
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "bad check: "+err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case req.WorkflowID == "" || req.StepID == "" || req.Tool == "":
		http.Error(w, "workflow_id, step_id and tool are required", http.StatusBadRequest)
		return
	case len(req.Arguments) == 0 || req.Arguments[0] != '{':
		http.Error(w, "arguments must be a JSON object", http.StatusBadRequest)
		return
	}
	key := req.WorkflowID + ":" + req.StepID + ":" + req.Tool
	token := rand.Text()
	_, err := a.do([]byte("SET"), []byte(key), append([]byte{pendingMark}, token...), []byte("NX"),
		[]byte("PX"), strconv.AppendInt(nil, a.lease.Milliseconds(), 10))
	if err == nil {
		writeJSON(w, map[string]string{"decision": "execute", "stage": "new", "key": key, "token": token})
		return
	}
	if !errors.Is(err, errNil) {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	v, err := a.do([]byte("GET"), []byte(key))
	switch {
	case errors.Is(err, errNil): // expired between the two commands
		http.Error(w, "try again", http.StatusServiceUnavailable)
	case err != nil:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	case len(v) > 0 && v[0] == successMark:
		writeJSON(w, map[string]any{"decision": "duplicate", "stage": "key", "key": key,
			"match": map[string]any{"key": key, "result": json.RawMessage(v[1:])}})
	default:
		writeJSON(w, map[string]string{"decision": "in_progress", "stage": "key", "key": key})
	}
}

type anchorComplete struct {
	Key    string          `json:"key"`
	Token  string          `json:"token"`
	Result json.RawMessage `json:"result"`
}

func (a *Anchor) complete(w http.ResponseWriter, r *http.Request) {
	var req anchorComplete
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, "bad completion: "+err.Error(), http.StatusBadRequest)
		return
	}
	if req.Key == "" || req.Token == "" || len(req.Result) == 0 {
		http.Error(w, "key, token and result are required", http.StatusBadRequest)
		return
	}
	if _, err := a.do([]byte("SET"), []byte(req.Key), append([]byte{successMark}, req.Result...)); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, map[string]string{"key": req.Key, "status": "SUCCESS"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// ServeAnchor serves a's Handler on addr until ctx ends. The listener is
// bound before it returns or serves, so a bad address fails at once.
func ServeAnchor(ctx context.Context, a *Anchor, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("anchor: %w", err)
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}
