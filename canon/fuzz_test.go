package canon

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzCanonicalize checks, for any input, that Canonicalize never panics,
// that whatever it accepts is valid JSON that encoding/json accepts too,
// and that its canonical output re-parses to the same bytes and hash.
func FuzzCanonicalize(f *testing.F) {
	seeds := []string{
		`{}`, `""`, `{"a":1}`, `{"b":[1,2.50,{"z":"é","a":-0}],"a":"x\u2028y"}`,
		`{"n":12345678901234567890,"m":1e400,"k":-0.0e-5}`, `"{\"a\":\"b\"}"`,
		`{"a":"\ud83d\ude00","b":"\ud800"}`, `{"a":{"a":{"a":[[[[{}]]]]}}}`,
		"{\"cafe\u0301\":1,\"café\":2}", `{"request_id":"x","items":[{"nonce":1,"v":2}]}`,
		`{"to":"a@b.co","body":"some words here that are prose.","cmd":"ls -la"}`, `[1]`, `{"a":1,}`,
		`{"date":"next Monday","check_in_date":"tomorrow","when":["today","Tuesday next week"]}`,
	}
	for _, s := range seeds {
		f.Add("tool", []byte(s))
	}
	cfg := DefaultConfig()
	cfg.MaxDepth = 16
	cfg.MaxLeaves = 500
	cfg.MaxStringBytes = 4096
	cfg.MaxTextView = 256
	c, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		call, err := c.Canonicalize(tool, args)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T is not *canon.Error: %v", err, err)
			}
			return
		}
		if !json.Valid(args) {
			t.Fatalf("accepted input that is not JSON: %q", args)
		}
		if !json.Valid(call.Canonical) {
			t.Fatalf("canonical form is not JSON: %q", call.Canonical)
		}
		again, err := c.Canonicalize(tool, call.Canonical)
		if err != nil {
			t.Fatalf("canonical form %q does not re-parse: %v", call.Canonical, err)
		}
		if !bytes.Equal(again.Canonical, call.Canonical) || again.Hash != call.Hash || again.IdentityDigest != call.IdentityDigest {
			t.Fatalf("not idempotent:\n %q\n %q", call.Canonical, again.Canonical)
		}
		if len(call.TextView()) > cfg.MaxTextView {
			t.Fatalf("text view of %d bytes exceeds %d", len(call.TextView()), cfg.MaxTextView)
		}
		// A reference date changes the identity digest at most: the
		// canonical bytes and the hash stay exact.
		on, err := c.CanonicalizeOn(tool, args, Date{2019, 3, 1})
		if err != nil {
			t.Fatalf("accepted without a reference date, refused with one: %v", err)
		}
		if !bytes.Equal(on.Canonical, call.Canonical) || on.Hash != call.Hash || !on.Relative && on.IdentityDigest != call.IdentityDigest {
			t.Fatalf("a reference date changed more than relative dates' digest: %q", args)
		}
	})
}
