package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLoneSurrogate(t *testing.T) {
	cases := []struct {
		name, body string
		path       string // "" : none found
	}{
		{"none", `{"a":"plain"}`, ""},
		{"a pair", `{"a":"\ud83d\ude00"}`, ""},
		{"an escaped backslash before u", `{"a":"\\ud800"}`, ""},
		{"other escapes", `{"a":"\n\t\"\\\/\u00e9"}`, ""},
		{"a lone high surrogate", `{"a":"x\ud83d"}`, "a"},
		{"a lone low surrogate", `{"a":"\ude00"}`, "a"},
		{"a high surrogate before a letter", `{"a":"\ud83d\u0041"}`, "a"},
		{"a reversed pair", `{"a":"\udc00\ud800"}`, "a"},
		{"an escaped backslash, then a lone one", `{"a":"\\\ud800"}`, "a"},
		{"in a key", `{"\ud800":1}`, "\ufffd"},
		{"nested", `{"x":1,"attempt":{"kind":"first","error":{"m":["ok","\udfff"]}}}`, "attempt.error.m[1]"},
		{"after arrays and objects", `{"a":[1,{"b":2},[3]],"c":{"d":"e"},"f":"\ud800"}`, "f"},
		{"top-level string", `"\ud800"`, "body"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.body)) {
				t.Fatalf("not valid JSON: %s", tc.body)
			}
			at := loneSurrogate([]byte(tc.body))
			switch {
			case tc.path == "" && at >= 0:
				t.Fatalf("found a lone surrogate at %d", at)
			case tc.path != "" && at < 0:
				t.Fatal("found none")
			case tc.path != "":
				if got := pathAt([]byte(tc.body), at); got != tc.path {
					t.Fatalf("path %q, want %q", got, tc.path)
				}
			}
		})
	}
}

// FuzzLoneSurrogate: on valid UTF-8 JSON, loneSurrogate finds one exactly
// when encoding/json's decoding makes more U+FFFD than the body spells,
// and names a path for it.
func FuzzLoneSurrogate(f *testing.F) {
	for _, s := range []string{`{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `["\\ud800"]`, `"\uFFFD"`, `{"k":"\udc00\ud800"}`, `{"\ufffd":1,"\ud800":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) || !json.Valid(body) {
			return
		}
		at := loneSurrogate(body)
		if at >= 0 {
			if p := pathAt(body, at); p == "" {
				t.Fatalf("empty path for offset %d in %q", at, body)
			}
		}
		replaced := 0
		d := json.NewDecoder(bytes.NewReader(body))
		for {
			tok, err := d.Token()
			if err != nil {
				break
			}
			if s, ok := tok.(string); ok {
				replaced += strings.Count(s, "\ufffd")
			}
		}
		if spelled := countSpelledFFFD(body); (at >= 0) != (replaced > spelled) {
			t.Fatalf("loneSurrogate = %d, but decoding made %d U+FFFD where the body spells %d: %q", at, replaced, spelled, body)
		}
	})
}

// countSpelledFFFD counts U+FFFD written in body, raw or as \ufffd.
func countSpelledFFFD(body []byte) int {
	n := 0
	for i := 0; i < len(body); i++ {
		switch {
		case bytes.HasPrefix(body[i:], []byte("\ufffd")):
			n++
			i += 2
		case body[i] == '\\' && i+6 <= len(body) && body[i+1] == 'u' && strings.EqualFold(string(body[i+2:i+6]), "fffd"):
			n++
			i += 5
		case body[i] == '\\':
			i++
		}
	}
	return n
}

// BenchmarkDecodeCheck: decoding a 1 KB check body, and the lone-surrogate
// scan it includes on its own, side by side.
//
//	go test ./server -run '^$' -bench 'DecodeCheck' -benchmem -count 5
func BenchmarkDecodeCheck(b *testing.B) {
	body := []byte(`{"session_id":"chat-42","workflow_id":"run-7","step_id":"3","tool":"send_email","arguments":{"to":"ann@example.com","subject":"Your invoice for March \u00e9t\u00e9","body":"` +
		strings.Repeat("Hello Ann, your March invoice is attached. ", 20) + `"},"attempt":{"kind":"first","number":1}}`)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var req CheckRequest
			if err := decodeJSON(body, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("surrogate-scan", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if loneSurrogate(body) >= 0 {
				b.Fatal("found one")
			}
		}
	})
}
