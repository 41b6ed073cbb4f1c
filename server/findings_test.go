package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/jackc/pgx/v5"

	"github.com/idem-dev/idem/funnel"
	"github.com/idem-dev/idem/ledger/postgres/pgtest"
)

// The tests in this file hold the findings of the ledger-safety review
// (issue 19), one or more per finding, each over HTTP as a caller sees it.

// answer is what these tests read of a check's answer or a problem.
type answer struct {
	Decision       string   `json:"decision"`
	Stage          string   `json:"stage"`
	Key            string   `json:"key"`
	Token          string   `json:"token"`
	Reason         string   `json:"reason"`
	Notes          []string `json:"notes"`
	LeaseExpiresAt string   `json:"lease_expires_at"`
	Match          *struct {
		Key    string          `json:"key"`
		Tool   string          `json:"tool"`
		Result json.RawMessage `json:"result"`
	} `json:"match"`
	// Problem members.
	Type   string `json:"type"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

// post sends body to path and decodes the answer.
func (e *env) post(path, body string) (int, http.Header, answer) {
	e.t.Helper()
	status, h, b := e.raw("POST", path, "application/json", "", []byte(body))
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		e.t.Fatalf("POST %s: %d, not JSON: %v: %s", path, status, err, b)
	}
	return status, h, a
}

// do checks body, expects a 200 with decision want, and returns the answer.
func (e *env) do(body, want string) answer {
	e.t.Helper()
	status, _, a := e.post("/v1/check", body)
	if status != 200 || a.Decision != want {
		e.t.Fatalf("check %s: %d %s (%s: %s), want %s", body, status, a.Decision, a.Type, a.Reason+a.Detail, want)
	}
	return a
}

// complete completes an execute answer with result.
func (e *env) complete(a answer, result string) {
	e.t.Helper()
	body := fmt.Sprintf(`{"key":%q,"token":%q,"result":%s}`, a.Key, a.Token, result)
	if status, _, r := e.post("/v1/complete", body); status != 200 {
		e.t.Fatalf("complete %s: %d %s", a.Key, status, r.Detail)
	}
}

// Finding 1: an explicit key equal to another tool's position replayed
// that tool's result, also under strict.
func TestExplicitKeyDoesNotReplayAnotherToolsPosition(t *testing.T) {
	strict := funnel.DefaultPolicy()
	strict.Strict = true
	for name, pols := range map[string][]funnel.Policy{"default policies": nil, "strict": {strict}} {
		t.Run(name, func(t *testing.T) {
			e := start(t, options{policies: pols})
			sent := e.do(`{"session_id":"alice","workflow_id":"wf","step_id":"1","tool":"send_money","arguments":{"to":"alice","amount":100}}`, "execute")
			e.complete(sent, `{"tx":"T-ALICE"}`)
			// Another tool, another session, the first call's position as its key.
			a := e.do(`{"session_id":"mallory","idempotency_key":"wf:1:send_money","tool":"refund","arguments":{"tx":"T-9"}}`, "execute")
			if a.Key == sent.Key {
				t.Errorf("the explicit key %q is the position's key", a.Key)
			}
			// The same explicit key on a third tool is a key of its own.
			b := e.do(`{"session_id":"mallory","idempotency_key":"wf:1:send_money","tool":"cancel","arguments":{"tx":"T-9"}}`, "execute")
			if b.Key == a.Key {
				t.Errorf("one explicit key on two tools shares the ledger key %q", a.Key)
			}
		})
	}
}

// Finding 1: an explicit key "K#s1" took the place of sampling retry 1 of
// "K", and the reverse.
func TestExplicitKeyCannotNameADerivedKey(t *testing.T) {
	e := start(t, options{})
	retry := e.do(`{"session_id":"a","idempotency_key":"K","tool":"charge","arguments":{"amount":5},"attempt":{"kind":"sampling","number":1}}`, "execute")
	e.complete(retry, `"from the sampling retry"`)
	a := e.do(`{"session_id":"b","idempotency_key":"K#s1","tool":"charge","arguments":{"amount":5}}`, "execute")
	if a.Key == retry.Key {
		t.Fatalf("explicit key K#s1 and sampling retry 1 of K share %q", a.Key)
	}
	e.complete(a, `"from K#s1"`)
	// And the other way round: K#s1 first, then the sampling retry of K.
	first := e.do(`{"session_id":"c","idempotency_key":"J#s1","tool":"charge","arguments":{"amount":5}}`, "execute")
	e.complete(first, `"from J#s1"`)
	e.do(`{"session_id":"d","idempotency_key":"J","tool":"charge","arguments":{"amount":5},"attempt":{"kind":"sampling","number":1}}`, "execute")
}

// Finding 3: a different payload under one explicit key is refused with
// 422 by default; strict: false keeps the replay.
func TestExplicitKeyMismatchIs422(t *testing.T) {
	e := start(t, options{})
	first := e.do(`{"session_id":"s","idempotency_key":"pay-1","tool":"charge","arguments":{"amount":5,"card":"c-1"}}`, "execute")
	e.complete(first, `{"charged":5}`)
	status, _, p := e.post("/v1/check", `{"session_id":"s","idempotency_key":"pay-1","tool":"charge","arguments":{"amount":6,"card":"c-1"}}`)
	if status != http.StatusUnprocessableEntity || p.Type != "urn:idem:problem:payload-mismatch" || p.Field != "idempotency_key" || !strings.Contains(p.Detail, "amount") {
		t.Fatalf("another amount under the key: %d %+v, want 422 payload-mismatch naming amount", status, p)
	}
	// The same call again still replays.
	if a := e.do(`{"session_id":"s","idempotency_key":"pay-1","tool":"charge","arguments":{"card":"c-1","amount":5.0}}`, "duplicate"); string(a.Match.Result) != `{"charged":5}` {
		t.Errorf("replayed %s", a.Match.Result)
	}

	lax := funnel.DefaultPolicy()
	lax.Strict = false
	e2 := start(t, options{policies: []funnel.Policy{lax}})
	first = e2.do(`{"session_id":"s","idempotency_key":"pay-1","tool":"charge","arguments":{"amount":5}}`, "execute")
	e2.complete(first, `{"charged":5}`)
	if a := e2.do(`{"session_id":"s","idempotency_key":"pay-1","tool":"charge","arguments":{"amount":6}}`, "duplicate"); string(a.Match.Result) != `{"charged":5}` {
		t.Errorf("strict false: replayed %s", a.Match.Result)
	}
}

// Finding 3: under a positional key, a retry whose identity fields differ
// is not replayed but asked about, naming the fields; a reworded text
// still replays (on_key_mismatch: replay is TestOnKeyMismatchReplay).
func TestPositionalIdentityMismatchConfirms(t *testing.T) {
	e := start(t, options{})
	first := e.do(`{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"send_email","arguments":{"to":"ann@example.com","subject":"Invoice","body":"Hello Ann, here is your invoice for March."}}`, "execute")
	e.complete(first, `{"message_id":"m-1"}`)
	a := e.do(`{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"send_email","arguments":{"to":"bob@example.com","subject":"Invoice","body":"Hello Bob, here is your invoice for March."}}`, "confirm")
	if a.Stage != "key" || !strings.Contains(a.Reason, "to") || a.Match == nil || a.Match.Key != first.Key {
		t.Errorf("another recipient at the position: %+v, want confirm at key naming \"to\"", a)
	}
	if a.Match != nil && len(a.Match.Result) != 0 {
		t.Errorf("the confirm hands back the other call's result %s", a.Match.Result)
	}
	reworded := e.do(`{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"send_email","arguments":{"to":"ann@example.com","subject":"Your invoice","body":"Hi Ann, attached is the March invoice."}}`, "duplicate")
	if string(reworded.Match.Result) != `{"message_id":"m-1"}` {
		t.Errorf("reworded retry replayed %s", reworded.Match.Result)
	}

}

// Finding 4: a corrupt record answered 500 to every check and to DELETE.
// Now: a 500 problem naming the key, counted, and DELETE removes it.
func TestCorruptRecordCanBeDeleted(t *testing.T) {
	t.Run("badger", func(t *testing.T) {
		dir := t.TempDir()
		e := start(t, options{dir: dir})
		a := e.do(`{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"charge","arguments":{"amount":5}}`, "execute")
		e.complete(a, `{"charged":5}`)
		e.stop()
		corruptBadger(t, dir, a.Key)
		corruptRecordAnswers(t, start(t, options{dir: dir}), a.Key)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		schema := pgtest.Schema(t, dsn, "server_corrupt_")
		e := start(t, options{postgresDSN: dsn, schema: schema})
		a := e.do(`{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"charge","arguments":{"amount":5}}`, "execute")
		e.complete(a, `{"charged":5}`)
		// A bad row: an embedding that is not a whole number of float32s.
		conn, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		tag, err := conn.Exec(t.Context(), `UPDATE `+pgx.Identifier{schema, "idem_records"}.Sanitize()+` SET embedding = '\x010203' WHERE key = $1`, a.Key)
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("corrupting the row: %v %v", tag, err)
		}
		corruptRecordAnswers(t, e, a.Key)
	})
}

// corruptBadger flips a byte in the middle of the stored value of every
// record whose key ends in key, in the Badger directory dir (closed).
func corruptBadger(t *testing.T, dir, key string) {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.Update(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{'r'}})
		defer it.Close()
		var keys [][]byte
		var vals [][]byte
		for it.Rewind(); it.Valid(); it.Next() {
			if !bytes.HasSuffix(it.Item().Key(), []byte(key)) {
				continue
			}
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			v[len(v)/2] ^= 0xff
			keys, vals = append(keys, it.Item().KeyCopy(nil)), append(vals, v)
		}
		for i := range keys {
			if err := txn.Set(keys[i], vals[i]); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("corrupting %q: %d records, %v", key, n, err)
	}
}

func corruptRecordAnswers(t *testing.T, e *env, key string) {
	t.Helper()
	check := `{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"charge","arguments":{"amount":5}}`
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/records/" + url.PathEscape(key), ""},
		{"POST", "/v1/check", check},
	} {
		ct := ""
		if tc.body != "" {
			ct = "application/json"
		}
		status, _, b := e.raw(tc.method, tc.path, ct, "", []byte(tc.body))
		var p answer
		json.Unmarshal(b, &p)
		if status != 500 || p.Type != "urn:idem:problem:corrupt-record" || !strings.Contains(p.Detail, key) {
			t.Errorf("%s %s on a corrupt record: %d %s, want a 500 corrupt-record problem naming %q", tc.method, tc.path, status, b, key)
		}
	}
	_, _, m := e.raw("GET", "/metrics", "", "", nil)
	if !strings.Contains(string(m), `idem_ledger_corrupt_records_total{tenant="default"} 2`) {
		t.Errorf("corrupt reads not counted:\n%s", grepLines(string(m), "corrupt"))
	}
	if status, _, b := e.raw("DELETE", "/v1/records/"+url.PathEscape(key), "", "", nil); status != 204 {
		t.Fatalf("DELETE of a corrupt record: %d %s, want 204", status, b)
	}
	e.do(check, "execute")
}

func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// logBuffer collects log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Finding 5: a body shorter than its Content-Length was a 500 with an
// ERROR log line (any client could flood the log).
func TestTruncatedBodyIs400WithoutAnErrorLine(t *testing.T) {
	var logs logBuffer
	e := start(t, options{logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"session_id":"s","idempotency_key":"k","tool":"t"`
	fmt.Fprintf(conn, "POST /v1/check HTTP/1.1\r\nHost: idem\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body)+100, body)
	conn.(*net.TCPConn).CloseWrite()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p answer
	json.NewDecoder(resp.Body).Decode(&p)
	if resp.StatusCode != 400 || p.Field != "body" || p.Type != "urn:idem:problem:invalid-field" {
		t.Errorf("truncated body: %d %+v, want 400 naming the body", resp.StatusCode, p)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a client's truncated body logged an error:\n%s", logs.String())
	}
}

// Finding 5: lone surrogates in session_id became U+FFFD, so two
// sessions merged; control characters were accepted in keys; field was
// missing for several field errors.
func TestFieldErrorsNameTheirField(t *testing.T) {
	e := start(t, options{})
	cases := []struct {
		name, body, field string
	}{
		{"lone high surrogate in session_id", `{"session_id":"\ud800","idempotency_key":"k","tool":"t","arguments":{"a":1}}`, "session_id"},
		{"another lone surrogate in session_id", `{"session_id":"\udfff","idempotency_key":"k","tool":"t","arguments":{"a":1}}`, "session_id"},
		{"reversed pair in session_id", `{"session_id":"\udc00\ud800","idempotency_key":"k","tool":"t","arguments":{"a":1}}`, "session_id"},
		{"lone surrogate in the key", `{"session_id":"s","idempotency_key":"k\ud800","tool":"t","arguments":{"a":1}}`, "idempotency_key"},
		{"lone surrogate in attempt.error", `{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":1},"attempt":{"kind":"sampling","error":{"m":"\ud800"}}}`, "attempt.error.m"},
		{"NUL in the key", `{"session_id":"s","idempotency_key":"a\u0000b","tool":"t","arguments":{"a":1}}`, "idempotency_key"},
		{"CR in the key", `{"session_id":"s","idempotency_key":"a\rb","tool":"t","arguments":{"a":1}}`, "idempotency_key"},
		{"LF in the key", `{"session_id":"s","idempotency_key":"a\nb","tool":"t","arguments":{"a":1}}`, "idempotency_key"},
		{"LF in workflow_id", `{"session_id":"s","workflow_id":"w\n","step_id":"1","tool":"t","arguments":{"a":1}}`, "workflow_id"},
		{"NUL in step_id", `{"session_id":"s","workflow_id":"w","step_id":"1\u0000","tool":"t","arguments":{"a":1}}`, "step_id"},
		{"missing session_id", `{"idempotency_key":"k","tool":"t","arguments":{"a":1}}`, "session_id"},
		{"missing tool", `{"session_id":"s","idempotency_key":"k","arguments":{"a":1}}`, "tool"},
		{"missing arguments", `{"session_id":"s","idempotency_key":"k","tool":"t"}`, "arguments"},
		{"null arguments", `{"session_id":"s","idempotency_key":"k","tool":"t","arguments":null}`, "arguments"},
		{"bad attempt.kind", `{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":1},"attempt":{"kind":"again"}}`, "attempt.kind"},
		{"negative attempt.number", `{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":1},"attempt":{"kind":"transient","number":-1}}`, "attempt.number"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, p := e.post("/v1/check", tc.body)
			if status != 400 || p.Field != tc.field || p.Type != "urn:idem:problem:invalid-field" {
				t.Errorf("%d %+v, want 400 invalid-field naming %q", status, p, tc.field)
			}
		})
	}
	for _, key := range []string{"a\x00b", "a\rb", "a\nb"} {
		status, _, b := e.raw("GET", "/v1/records/"+url.PathEscape(key), "", "", nil)
		var p answer
		json.Unmarshal(b, &p)
		if status != 400 || p.Field != "key" {
			t.Errorf("GET /v1/records/%q: %d %s, want 400 naming key", key, status, b)
		}
	}
}

// Finding 5: in_progress answers carried no lease end and no Retry-After.
func TestInProgressSaysWhenTheLeaseEnds(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	e := start(t, options{now: func() time.Time { return now }, lease: 90 * time.Second})
	body := `{"session_id":"s","idempotency_key":"k-run","tool":"charge","arguments":{"amount":1}}`
	e.do(body, "execute")
	status, h, a := e.post("/v1/check", body)
	if status != 200 || a.Decision != "in_progress" {
		t.Fatalf("%d %+v", status, a)
	}
	if want := now.Add(90 * time.Second).Format(time.RFC3339); a.LeaseExpiresAt != want {
		t.Errorf("lease_expires_at %q, want %q", a.LeaseExpiresAt, want)
	}
	if got := h.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After %q, want 60 (the lease's 90 s, at most 60)", got)
	}
}

// TestRequestLinesOnlyAtDebug: at debug level every request is logged
// with its route, status and duration, never with its arguments; at info
// level no request line is written (nor built: the line is checked for
// before its fields are gathered).
func TestRequestLinesOnlyAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		t.Run(level.String(), func(t *testing.T) {
			var logs logBuffer
			e := start(t, options{logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))})
			e.do(`{"session_id":"s","idempotency_key":"k","tool":"charge","arguments":{"card":"4111-secret-card"}}`, "execute")
			lines := logs.String()
			if strings.Contains(lines, "4111-secret-card") {
				t.Fatalf("the log holds a tool argument:\n%s", lines)
			}
			got := strings.Count(lines, `msg=request method=POST route=/v1/check status=200 tenant=default duration_us=`)
			if want := map[slog.Level]int{slog.LevelDebug: 1, slog.LevelInfo: 0}[level]; got != want {
				t.Errorf("%d request lines for one check at level %v, want %d:\n%s", got, level, want, lines)
			}
		})
	}
}
