package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errUpstreamLost: the upstream's connection ended (it exited, or wrote
// something that is not JSON-RPC) before it answered.
var errUpstreamLost = errors.New("mcpgate: the upstream server's connection ended")

// upstream is one session's connection to the upstream server, dialed
// again after it ends, with the client's initialization replayed. It is
// safe for concurrent use.
type upstream struct {
	dial     Dialer
	log      *slog.Logger
	toClient func(context.Context, jsonrpc.Message) error
	// onListChanged runs when the upstream says its tool list changed.
	onListChanged func()
	// onRedial runs after a new connection finished its handshake.
	onRedial func()

	dialMu sync.Mutex // serializes dialing

	mu          sync.Mutex     // guards the fields below
	conn        mcp.Connection // nil when there is none
	gen         int            // counts connections dialed
	waiters     map[jsonrpc.ID]chan *jsonrpc.Response
	pass        map[jsonrpc.ID]struct{} // client requests relayed, not yet answered
	init        *jsonrpc.Request        // the client's initialize
	initialized *jsonrpc.Request        // the client's notifications/initialized
	next        int64
	lostGen     int // the newest connection that ended
	closed      bool
	readers     sync.WaitGroup
}

func newUpstream(dial Dialer, log *slog.Logger, toClient func(context.Context, jsonrpc.Message) error) *upstream {
	return &upstream{
		dial: dial, log: log, toClient: toClient,
		waiters: map[jsonrpc.ID]chan *jsonrpc.Response{}, pass: map[jsonrpc.ID]struct{}{},
		onListChanged: func() {}, onRedial: func() {},
	}
}

// live returns the current connection, dialing one (and replaying the
// client's initialization on it) when there is none.
func (u *upstream) live(ctx context.Context) (mcp.Connection, error) {
	u.mu.Lock()
	if c := u.conn; c != nil || u.closed {
		u.mu.Unlock()
		if c == nil {
			return nil, errUpstreamLost
		}
		return c, nil
	}
	u.mu.Unlock()
	u.dialMu.Lock()
	defer u.dialMu.Unlock()
	u.mu.Lock()
	if c := u.conn; c != nil {
		u.mu.Unlock()
		return c, nil
	}
	u.gen++
	init, initialized, gen := u.init, u.initialized, u.gen
	u.mu.Unlock()
	conn, err := u.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the upstream server: %w", err)
	}
	u.readers.Add(1)
	go u.read(conn, gen)
	if init != nil {
		if err := u.handshake(ctx, conn, init, initialized); err != nil {
			conn.Close()
			return nil, fmt.Errorf("initializing the upstream server again: %w", err)
		}
	}
	u.mu.Lock()
	if u.closed || u.lostGen >= gen {
		u.mu.Unlock()
		conn.Close()
		return nil, errUpstreamLost
	}
	u.conn = conn
	u.mu.Unlock()
	if init != nil {
		u.log.Info("upstream server started again", "generation", gen)
		u.onRedial()
	}
	return conn, nil
}

// handshake replays the client's initialize (under the gateway's own ID)
// and notifications/initialized on a new connection.
func (u *upstream) handshake(ctx context.Context, conn mcp.Connection, init, initialized *jsonrpc.Request) error {
	req := &jsonrpc.Request{ID: u.newID(), Method: init.Method, Params: init.Params}
	ch := u.wait(req.ID)
	defer u.forget(req.ID)
	if err := conn.Write(ctx, req); err != nil {
		return err
	}
	select {
	case resp := <-ch:
		if resp == nil {
			return errUpstreamLost
		}
		if resp.Error != nil {
			return resp.Error
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	if initialized != nil {
		return conn.Write(ctx, initialized)
	}
	return nil
}

// newID returns an ID for a request of the gateway's own.
func (u *upstream) newID() jsonrpc.ID {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.next++
	id, _ := jsonrpc.MakeID("idem-mcp-" + strconv.FormatInt(u.next, 10))
	return id
}

// wait registers a waiter for the answer to id: the answer, or nil when
// the connection ended first.
func (u *upstream) wait(id jsonrpc.ID) chan *jsonrpc.Response {
	ch := make(chan *jsonrpc.Response, 1)
	u.mu.Lock()
	u.waiters[id] = ch
	u.mu.Unlock()
	return ch
}

func (u *upstream) forget(id jsonrpc.ID) {
	u.mu.Lock()
	delete(u.waiters, id)
	u.mu.Unlock()
}

// start sends req (a call) and returns where its answer will arrive; the
// caller forgets it when done.
func (u *upstream) start(ctx context.Context, req *jsonrpc.Request) (chan *jsonrpc.Response, error) {
	conn, err := u.live(ctx)
	if err != nil {
		return nil, err
	}
	ch := u.wait(req.ID)
	if err := conn.Write(ctx, req); err != nil {
		u.forget(req.ID)
		return nil, fmt.Errorf("writing to the upstream server: %w", err)
	}
	return ch, nil
}

// request sends a request of the gateway's own and waits for its answer.
func (u *upstream) request(ctx context.Context, method string, params json.RawMessage) (*jsonrpc.Response, error) {
	req := &jsonrpc.Request{ID: u.newID(), Method: method, Params: params}
	ch, err := u.start(ctx, req)
	if err != nil {
		return nil, err
	}
	defer u.forget(req.ID)
	select {
	case resp := <-ch:
		if resp == nil {
			return nil, errUpstreamLost
		}
		return resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// relayCall passes a client's request through; its answer goes back to
// the client as the upstream writes it.
func (u *upstream) relayCall(ctx context.Context, req *jsonrpc.Request) error {
	conn, err := u.live(ctx)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.pass[req.ID] = struct{}{}
	u.mu.Unlock()
	if err := conn.Write(ctx, req); err != nil {
		u.mu.Lock()
		delete(u.pass, req.ID)
		u.mu.Unlock()
		return err
	}
	return nil
}

// relay passes a notification or a response through. A notification
// starts the upstream when it is not running; a response (to a request
// of a connection that may have ended) does not.
func (u *upstream) relay(ctx context.Context, msg jsonrpc.Message, dial bool) error {
	var conn mcp.Connection
	if dial {
		c, err := u.live(ctx)
		if err != nil {
			return err
		}
		conn = c
	} else {
		u.mu.Lock()
		conn = u.conn
		u.mu.Unlock()
		if conn == nil {
			return nil
		}
	}
	return conn.Write(ctx, msg)
}

// remember keeps the client's initialization, to replay it on a new
// connection.
func (u *upstream) remember(req *jsonrpc.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch req.Method {
	case "initialize":
		u.init = req
	case "notifications/initialized":
		u.initialized = req
	}
}

// read relays conn's messages until it ends, then fails what waited on
// it.
func (u *upstream) read(conn mcp.Connection, gen int) {
	defer u.readers.Done()
	ctx := context.Background()
	for {
		msg, err := conn.Read(ctx)
		if err != nil {
			u.lost(conn, gen, err)
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			u.mu.Lock()
			ch, waited := u.waiters[m.ID]
			delete(u.waiters, m.ID)
			_, passed := u.pass[m.ID]
			delete(u.pass, m.ID)
			u.mu.Unlock()
			if waited {
				ch <- m
				continue
			}
			if !passed {
				u.log.Debug("upstream answered a request it was not sent", "generation", gen)
			}
			u.toClient(ctx, m)
		case *jsonrpc.Request:
			if m.Method == "notifications/tools/list_changed" {
				u.onListChanged()
			}
			u.toClient(ctx, m)
		}
	}
}

// lost ends the connection: every call waiting on it gets nil, every
// client request relayed on it a JSON-RPC error.
func (u *upstream) lost(conn mcp.Connection, gen int, cause error) {
	conn.Close()
	u.mu.Lock()
	if u.conn == conn {
		u.conn = nil
	}
	u.lostGen = max(u.lostGen, gen)
	waiters, pass := u.waiters, u.pass
	u.waiters, u.pass = map[jsonrpc.ID]chan *jsonrpc.Response{}, map[jsonrpc.ID]struct{}{}
	closed := u.closed
	u.mu.Unlock()
	if !closed {
		u.log.Warn("the upstream server's connection ended", "generation", gen, "err", cause,
			"calls_in_flight", len(waiters), "requests_in_flight", len(pass))
	}
	for _, ch := range waiters {
		ch <- nil
	}
	for id := range pass {
		u.toClient(context.Background(), &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
			Code: jsonrpc.CodeInternalError, Message: "idem mcp: the upstream server's connection ended before it answered",
		}})
	}
}

// close ends the connection and waits for its reader.
func (u *upstream) close() {
	u.mu.Lock()
	u.closed = true
	conn := u.conn
	u.conn = nil
	u.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	u.readers.Wait()
}
