package server_test

import (
	"bytes"
	"strings"
	"testing"
)

// TestBadInput: hostile and broken bodies over HTTP each get their 4xx
// with a problem naming the field, and the server stays up.
func TestBadInput(t *testing.T) {
	e := start(t, options{})
	deep := strings.Repeat(`{"a":`, 10_000) + "1" + strings.Repeat("}", 10_000)
	deepArray := strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000)
	big := bytes.Repeat([]byte("x"), 10<<20)
	cases := []struct {
		name   string
		ctype  string
		body   []byte
		status int
		detail string
	}{
		{"malformed JSON", "application/json", []byte(`{"session_id": "s",`), 400, "body"},
		{"not JSON at all", "application/json", []byte(`session_id=s`), 400, "malformed JSON"},
		{"empty body", "application/json", nil, 400, "empty"},
		{"two values", "application/json", []byte(`{"session_id":"s"} {}`), 400, "more than one"},
		{"array body", "application/json", []byte(`[1,2]`), 400, "object"},
		{"wrong type: session_id", "application/json", []byte(`{"session_id":5,"tool":"t","arguments":{}}`), 400, "session_id: want a string"},
		{"wrong type: wait_ms", "application/json", []byte(`{"session_id":"s","tool":"t","arguments":{"a":1},"wait_ms":"soon"}`), 400, "wait_ms"},
		{"wrong type: takeover", "application/json", []byte(`{"session_id":"s","tool":"t","arguments":{"a":1},"takeover":"yes"}`), 400, "takeover"},
		{"wrong type: attempt", "application/json", []byte(`{"session_id":"s","tool":"t","arguments":{"a":1},"attempt":3}`), 400, "attempt"},
		{"huge wait_ms", "application/json", []byte(`{"session_id":"s","tool":"t","arguments":{"a":1},"wait_ms":1e400}`), 400, "wait_ms"},
		{"negative wait_ms", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":1},"wait_ms":-1}`), 400, "wait_ms: negative"},
		{"arguments not an object", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":[1]}`), 400, "arguments"},
		{"arguments a string of garbage", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":"{nope"}`), 400, "arguments"},
		{"missing session", "application/json", []byte(`{"idempotency_key":"k","tool":"t","arguments":{"a":1}}`), 400, "session_id"},
		{"missing tool", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","arguments":{"a":1}}`), 400, "tool"},
		{"missing arguments", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t"}`), 400, "arguments"},
		{"10 MB body", "application/json", big, 413, "larger than"},
		{"nesting depth 10,000 in arguments", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":` + deep + `}`), 400, ""},
		{"nesting depth 10,000 of arrays", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":` + deepArray + `}}`), 400, ""},
		{"invalid UTF-8", "application/json", []byte("{\"session_id\":\"s\xff\xfe\",\"idempotency_key\":\"k\",\"tool\":\"t\",\"arguments\":{\"a\":1}}"), 400, "UTF-8"},
		{"invalid UTF-8 inside arguments string", "application/json", []byte("{\"session_id\":\"s\",\"idempotency_key\":\"k\",\"tool\":\"t\",\"arguments\":\"{\\\"a\\\":\\\"\xc3\\\"}\"}"), 400, "UTF-8"},
		{"unknown field", "application/json", []byte(`{"session_id":"s","tool":"t","arguments":{},"sesion":"x"}`), 400, "sesion: unknown field"},
		{"unknown nested field", "application/json", []byte(`{"session_id":"s","tool":"t","arguments":{"a":1},"attempt":{"kind":"first","try":2}}`), 400, "try: unknown field"},
		{"NUL in tool name", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t\u0000x","arguments":{"a":1}}`), 400, "tool"},
		{"key too long", "application/json", []byte(`{"session_id":"s","idempotency_key":"` + strings.Repeat("k", 2000) + `","tool":"t","arguments":{"a":1}}`), 413, "key"},
		{"reference_time not a date", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":1},"reference_time":"next Friday"}`), 400, "reference_time"},
		{"reference_time without an offset", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":1},"reference_time":"2019-03-01T21:00:00"}`), 400, "reference_time"},
		{"reference_time no such day", "application/json", []byte(`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":{"a":1},"reference_time":"2019-02-30"}`), 400, "reference_time"},
		{"wrong content type", "application/x-www-form-urlencoded", []byte(`session_id=s`), 415, "Content-Type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := e.raw("POST", "/v1/check", tc.ctype, "", tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", status, tc.status, body)
			}
			if h.Get("Content-Type") != "application/problem+json" {
				t.Errorf("Content-Type %q", h.Get("Content-Type"))
			}
			p := problem(t, body)
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail %q does not contain %q", p.Detail, tc.detail)
			}
			if status, _, _ := e.raw("GET", "/healthz", "", "", nil); status != 200 {
				t.Fatalf("the server is down after %s: %d", tc.name, status)
			}
		})
	}
	// The same for the other bodies.
	for _, path := range []string{"/v1/complete", "/v1/fail"} {
		for _, body := range [][]byte{[]byte(`{"key":1}`), []byte(`{"key":"k","token":"t","extra":1}`), big, []byte("{\"key\":\"\xff\"}")} {
			status, _, resp := e.raw("POST", path, "application/json", "", body)
			if status != 400 && status != 413 {
				t.Errorf("POST %s: %d %.200s", path, status, resp)
			}
		}
	}
}
