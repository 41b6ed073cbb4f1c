package server

import (
	"encoding/json"
	"net/http"
	"testing"
)

// FuzzDecodeCheck: the strict decoder never panics, every error it
// returns is the client's (a 4xx naming what is wrong), and what it
// accepts re-encodes to a body it accepts again, unchanged.
func FuzzDecodeCheck(f *testing.F) {
	for _, s := range []string{
		`{"session_id":"s","workflow_id":"w","step_id":"1","tool":"t","arguments":{"a":1}}`,
		`{"session_id":"s","idempotency_key":"k","tool":"t","arguments":"{\"a\":1}","attempt":{"kind":"sampling","number":2,"error":{"code":429}},"wait_ms":100,"takeover":true}`,
		`{"session_id":"s","arguments":{"n":12345678901234567890}}`,
		`{"session_id":"s","tool":"t","arguments":{"date":"next Monday"},"reference_time":"2019-03-01T21:00:00-08:00"}`,
		`{"session_id":5}`, `{"x":1}`, `[]`, `{"session_id":"\ud800"}`, "{\"a\":\"\xff\"}", `{} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req CheckRequest
		err := decodeJSON(body, &req)
		if err != nil {
			p := problemOf(err)
			status, detail := p.Status, p.Detail
			if status != http.StatusBadRequest || detail == "" {
				t.Fatalf("decode error %v maps to %d %q, want a 400 with a detail", err, status, detail)
			}
			return
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("re-encoding an accepted request: %v", err)
		}
		var req2 CheckRequest
		if err := decodeJSON(again, &req2); err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		third, _ := json.Marshal(req2)
		if string(third) != string(again) {
			t.Fatalf("round trip changed the request:\n%s\n%s", again, third)
		}
	})
}
