package canon

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func mustNew(t testing.TB, cfg Config) *Canonicalizer {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func mustCanon(t testing.TB, c *Canonicalizer, tool, args string) *Call {
	t.Helper()
	call, err := c.Canonicalize(tool, []byte(args))
	if err != nil {
		t.Fatalf("Canonicalize(%s, %s): %v", tool, args, err)
	}
	return call
}

// quoteJSON wraps a JSON text in a JSON string, as OpenAI sends arguments.
func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestEquivalentSpellingsShareOneHash(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	cases := []struct {
		name string
		a, b string
	}{
		{"key order", `{"a":1,"b":{"x":true,"y":null}}`, `{"b":{"y":null,"x":true},"a":1}`},
		{"whitespace", `{"a":[1,2],"b":"x"}`, "\n{ \"a\" : [ 1 ,\t2 ] ,\r\n \"b\":\"x\" }  "},
		{"one and one point zero", `{"n":1}`, `{"n":1.0}`},
		{"exponent", `{"n":1}`, `{"n":1e0}`},
		{"negative exponent", `{"n":1}`, `{"n":10E-1}`},
		{"trailing zeros", `{"n":12.5}`, `{"n":12.50000}`},
		{"negative zero", `{"n":0}`, `{"n":-0}`},
		{"negative zero fraction", `{"n":0}`, `{"n":-0.0e7}`},
		{"big exponent", `{"n":1e21}`, `{"n":10e20}`},
		{"escapes", `{"s":"a/b\"c"}`, `{"s":"a\/b\u0022c"}`},
		{"unicode escape", `{"s":"é"}`, `{"s":"\u00e9"}`},
		{"surrogate pair", `{"s":"😀"}`, `{"s":"\ud83d\ude00"}`},
		{"NFD vs NFC", `{"s":"café"}`, "{\"s\":\"cafe\u0301\"}"},
		{"NFD key", `{"café":1}`, "{\"cafe\u0301\":1}"},
		{"string-wrapped arguments", `{"a":1,"b":"x"}`, quoteJSON(`{"b":"x","a":1.0}`)},
		{"empty string is empty object", `{}`, `""`},
		{"html characters", `{"s":"<b>&</b>"}`, `{"s":"\u003cb\u003e\u0026\u003c/b\u003e"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := mustCanon(t, c, "tool", tc.a)
			b := mustCanon(t, c, "tool", tc.b)
			if string(a.Canonical) != string(b.Canonical) {
				t.Errorf("canonical differs:\n %s\n %s", a.Canonical, b.Canonical)
			}
			if a.Hash != b.Hash || a.IdentityDigest != b.IdentityDigest {
				t.Errorf("hash %x/%x, identity %x/%x: want equal", a.Hash, b.Hash, a.IdentityDigest, b.IdentityDigest)
			}
		})
	}
}

func TestDifferentValuesGetDifferentHashes(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	base := `{"amount":12.5,"to":"bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door please","urgent":false}`
	changes := map[string]string{
		"amount":         `{"amount":12.51,"to":"bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door please","urgent":false}`,
		"recipient":      `{"amount":12.5,"to":"bob@example.org","items":[{"sku":"A1","qty":2}],"note":"leave at the door please","urgent":false}`,
		"nested value":   `{"amount":12.5,"to":"bob@example.com","items":[{"sku":"A1","qty":3}],"note":"leave at the door please","urgent":false}`,
		"text":           `{"amount":12.5,"to":"bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door, please","urgent":false}`,
		"boolean":        `{"amount":12.5,"to":"bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door please","urgent":true}`,
		"array order":    `{"amount":12.5,"to":"bob@example.com","items":[{"qty":2,"sku":"A1"},{"sku":"B2","qty":1}],"note":"leave at the door please","urgent":false}`,
		"number type":    `{"amount":"12.5","to":"bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door please","urgent":false}`,
		"case":           `{"amount":12.5,"to":"Bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door please","urgent":false}`,
		"added field":    `{"amount":12.5,"to":"bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door please","urgent":false,"cc":null}`,
		"removed field":  `{"amount":12.5,"to":"bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door please"}`,
		"null vs absent": `{"amount":12.5,"to":"bob@example.com","items":[{"sku":"A1","qty":2}],"note":"leave at the door please","urgent":null}`,
	}
	b := mustCanon(t, c, "pay", base)
	seen := map[uint64]string{b.Hash: "base"}
	for name, args := range changes {
		call := mustCanon(t, c, "pay", args)
		if prev, dup := seen[call.Hash]; dup {
			t.Errorf("%s: same hash as %s", name, prev)
		}
		seen[call.Hash] = name
	}
	if other := mustCanon(t, c, "refund", base); other.Hash == b.Hash || other.IdentityDigest == b.IdentityDigest {
		t.Error("another tool with the same arguments got the same hash or identity digest")
	}
}

func TestBigIntegersKeepEveryDigit(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	call := mustCanon(t, c, "t", `{"id":12345678901234567890,"neg":-98765432109876543210,"long":123456789012345678901234567890}`)
	want := `{"id":12345678901234567890,"long":1.2345678901234567890123456789e+29,"neg":-98765432109876543210}`
	if string(call.Canonical) != want {
		t.Fatalf("canonical = %s\nwant        %s", call.Canonical, want)
	}
	// Neighbours that float64 cannot tell apart stay apart here.
	a := mustCanon(t, c, "t", `{"id":12345678901234567890}`)
	b := mustCanon(t, c, "t", `{"id":12345678901234567891}`)
	if a.Hash == b.Hash {
		t.Error("12345678901234567890 and …891 share a hash")
	}
}

func TestCanonicalizationIsIdempotent(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	inputs := []string{
		`{"b":[1,2.50,{"z":"é","a":-0}],"a":"x\u2028y\u0001","c":1E400}`,
		`{"emoji":"😀","nested":{"deep":[[[]]],"empty":{}},"n":0.000001234,"m":1234567e-30}`,
		quoteJSON(`{"k":"v"}`),
	}
	for _, in := range inputs {
		first := mustCanon(t, c, "t", in)
		second := mustCanon(t, c, "t", string(first.Canonical))
		if string(first.Canonical) != string(second.Canonical) || first.Hash != second.Hash {
			t.Errorf("not idempotent:\n %s\n %s", first.Canonical, second.Canonical)
		}
		if !json.Valid(first.Canonical) {
			t.Errorf("canonical form is not valid JSON: %s", first.Canonical)
		}
	}
}

func TestCanonicalNumberSpelling(t *testing.T) {
	cases := map[string]string{
		"0": "0", "-0": "0", "0.0": "0", "0e10": "0", "1": "1", "-1": "-1", "1.0": "1",
		"1e0": "1", "10E-1": "1", "100": "100", "1e2": "100", "1.5": "1.5", "-1.50": "-1.5",
		"0.1": "0.1", "1e-6": "0.000001", "1e-7": "1e-7", "1.5e-7": "1.5e-7",
		"123456789012345678901": "123456789012345678901", "1e21": "1e+21", "1e20": "100000000000000000000",
		"1e22": "1e+22", "12.5e21": "1.25e+22", "0.000123": "0.000123", "1E+2": "100",
		"123e-2": "1.23", "1e0000000000000000001": "10",
	}
	for in, want := range cases {
		got, err := canonicalNumber([]byte(in))
		if err != nil || got != want {
			t.Errorf("canonicalNumber(%s) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"1e1000001", "1e99999999", "1e-99999999"} {
		if got, err := canonicalNumber([]byte(bad)); err == nil {
			t.Errorf("canonicalNumber(%s) = %q, want an out-of-range error", bad, got)
		}
	}
}

func TestBadInputNamesThePath(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxDepth = 4
	cfg.MaxLeaves = 5
	cfg.MaxStringBytes = 16
	cfg.MaxBytes = 200
	c := mustNew(t, cfg)
	cases := []struct {
		name, tool, args string
		err              error
		path             string
		detail           string
	}{
		{"malformed", "t", `{"a":1,}`, ErrSyntax, "arguments", "want an object key"},
		{"truncated", "t", `{"a":[1,2`, ErrSyntax, "arguments.a", "end of input"},
		{"trailing data", "t", `{"a":1} x`, ErrSyntax, "arguments", "after the value"},
		{"bad literal", "t", `{"a":tru}`, ErrSyntax, "arguments.a", "want true"},
		{"bad number", "t", `{"a":01}`, ErrSyntax, "arguments", "want ',' or '}'"},
		{"bad escape", "t", `{"a":"\x"}`, ErrSyntax, "arguments.a", `invalid escape \x`},
		{"control char", "t", "{\"a\":\"x\ty\"}", ErrSyntax, "arguments.a", "control character"},
		{"not an object", "t", `[1,2]`, ErrNotObject, "arguments", "got an array"},
		{"null", "t", `null`, ErrNotObject, "arguments", "got null"},
		{"string holding array", "t", quoteJSON(`[1]`), ErrNotObject, "arguments", "inside the arguments string"},
		{"string holding garbage", "t", quoteJSON(`{"a":`), ErrSyntax, "arguments.a", "inside the arguments string"},
		{"empty", "t", ``, ErrSyntax, "arguments", "empty"},
		{"duplicate key", "t", `{"x":{"a":1,"b":2,"a":3}}`, ErrDuplicateKey, "arguments.x", `duplicate key "a"`},
		{"duplicate after NFC", "t", "{\"café\":1,\"cafe\u0301\":2}", ErrDuplicateKey, "arguments", "duplicate key"},
		{"invalid UTF-8", "t", "{\"a\":{\"b\":\"\xff\"}}", ErrInvalidUTF8, "arguments.a.b", "invalid UTF-8"},
		{"lone surrogate", "t", `{"a":"\ud800x"}`, ErrInvalidUTF8, "arguments.a", "surrogate"},
		{"too deep", "t", `{"a":{"b":{"c":{"d":{"e":1}}}}}`, ErrTooDeep, "arguments.a.b.c.d", "deeper than 4"},
		{"too many leaves", "t", `{"a":[1,2,3,4,5,6]}`, ErrTooManyLeaves, "arguments.a[5]", "more than 5 leaves"},
		{"string too long", "t", `{"a":"0123456789abcdefg"}`, ErrStringTooLong, "arguments.a", "longer than 16"},
		{"escaped string too long", "t", `{"a":"\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"}`, ErrStringTooLong, "arguments.a", "longer than 16"},
		{"too large", "t", `{"a":"` + strings.Repeat("x", 300) + `"}`, ErrTooLarge, "arguments", "more than the limit of 200"},
		{"number range", "t", `{"n":1e9999999}`, ErrNumberRange, "arguments.n", "out of range"},
		{"empty tool", "", `{}`, ErrBadTool, "tool", "empty"},
		{"tool control char", "a\nb", `{}`, ErrBadTool, "tool", "control character"},
		{"tool invalid UTF-8", "a\xffb", `{}`, ErrBadTool, "tool", "invalid UTF-8"},
		{"odd key in path", "t", `{"a b":{"c":[{"d":"\x"}]}}`, ErrSyntax, `arguments["a b"].c[0].d`, "invalid escape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Canonicalize(tc.tool, []byte(tc.args))
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err %T is not *canon.Error", err)
			}
			if e.Path != tc.path {
				t.Errorf("path = %q, want %q (%v)", e.Path, tc.path, err)
			}
			if !strings.Contains(err.Error(), tc.detail) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("message %q does not say %q at %q", err, tc.detail, tc.path)
			}
		})
	}
}

func classes(call *Call) map[string]string {
	m := make(map[string]string, len(call.Fields))
	for _, f := range call.Fields {
		m[f.Path] = f.Class.String() + " " + f.Rule
	}
	return m
}

func TestHeuristicClasses(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	call := mustCanon(t, c, "t", `{
		"user_id": "mia_li_3668", "amount": 12.5, "confirmed": true, "cc": null,
		"email": "a@b.co", "site": "https://example.com/x?y=1", "uuid": "123e4567-e89b-12d3-a456-426614174000",
		"when": "2024-05-01", "at": "2024-05-01T10:00:00Z", "clock": "19:30", "price": "12.50",
		"body": "Please find the report attached.", "subject": "Hello",
		"city": "New York", "address": "123 Main Street, Springfield, Illinois 62704",
		"cmd": "ls -la /tmp", "run": "rm -rf /tmp", "q": "SELECT * FROM users WHERE id = 3",
		"file": "main.go", "where": "src/util.go", "token": "HAT136", "label": "economy plus",
		"thoughts": "I think we should book the earlier flight because it is cheaper.",
		"request_id": "r-1", "meta": {"traceId": "abc"}, "empty": "", "list": [], "obj": {},
		"expression": "(168 + 114) * 2"
	}`)
	want := map[string]string{
		"user_id":      "identity heuristic:date", // placeholder, replaced below
		"amount":       "identity heuristic:number",
		"confirmed":    "identity heuristic:boolean",
		"cc":           "identity heuristic:null",
		"email":        "identity heuristic:email",
		"site":         "identity heuristic:url",
		"uuid":         "identity heuristic:uuid",
		"when":         "identity heuristic:date",
		"at":           "identity heuristic:date-time",
		"clock":        "identity heuristic:time",
		"price":        "identity heuristic:number-string",
		"body":         "text heuristic:name=body",
		"subject":      "text heuristic:name=subject",
		"city":         "identity heuristic:name=city",
		"address":      "identity heuristic:name=address",
		"cmd":          "identity heuristic:name=cmd",
		"run":          "identity heuristic:command",
		"q":            "identity heuristic:sql",
		"file":         "identity heuristic:name=file",
		"where":        "identity heuristic:path",
		"token":        "identity heuristic:token",
		"label":        "identity heuristic:short",
		"thoughts":     "text heuristic:prose",
		"request_id":   "ignored heuristic:volatile-name",
		"meta.traceId": "ignored heuristic:volatile-name",
		"empty":        "identity heuristic:empty-string",
		"list":         "identity heuristic:empty-container",
		"obj":          "identity heuristic:empty-container",
		"expression":   "identity heuristic:expression",
	}
	want["user_id"] = "identity heuristic:name=*_id"
	got := classes(call)
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: got %q, want %q", path, got[path], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d fields, want %d: %v", len(got), len(want), got)
	}
}

func TestSchemaAndConfigDecideBeforeHeuristics(t *testing.T) {
	schema := `{
		"type": "object",
		"properties": {
			"cabin": {"type": "string", "enum": ["economy", "business"]},
			"dob": {"type": "string", "format": "date"},
			"count": {"type": ["integer", "null"]},
			"title": {"type": "string", "x-idem-class": "identity"},
			"passengers": {"type": "array", "items": {"$ref": "#/$defs/person"}},
			"mode": {"anyOf": [{"const": "a"}, {"enum": ["b", "c"]}]},
			"free": {"type": "string"}
		},
		"$defs": {"person": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}}
	}`
	cfg := DefaultConfig()
	cfg.Tools = map[string]ToolConfig{"book": {
		Schema: json.RawMessage(schema),
		Fields: map[string]FieldRule{
			"passengers[].name": {Class: Text},
			"meta":              {Class: Ignored},
			"free":              {Class: Identity},
		},
	}}
	c := mustNew(t, cfg)
	call := mustCanon(t, c, "book", `{"cabin":"a long sentence that would be prose otherwise","dob":"last tuesday after lunch",
		"count":"seven", "title":"A title that heuristics would call prose.", "mode":"b",
		"passengers":[{"name":"Mia Li","age":"thirty"}], "free":"some free words in here", "meta":{"x":1,"y":"z"}}`)
	want := map[string]string{
		"cabin":              "identity schema:enum",
		"dob":                "identity schema:format=date",
		"count":              "identity schema:type=integer",
		"title":              "identity schema:x-idem-class",
		"mode":               "identity schema:enum",
		"passengers[0].name": "text config:passengers[].name",
		"passengers[0].age":  "identity schema:type=integer",
		"free":               "identity config:free",
		"meta.x":             "ignored config:meta",
		"meta.y":             "ignored config:meta",
	}
	got := classes(call)
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: got %q, want %q", path, got[path], w)
		}
	}
}

func TestIgnoredFieldsDoNotChangeTheHash(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tools = map[string]ToolConfig{"t": {Fields: map[string]FieldRule{"sent_at": {Class: Ignored}, "items[].trace": {Class: Ignored}}}}
	c := mustNew(t, cfg)
	a := mustCanon(t, c, "t", `{"a":1,"nonce":"n1","request_id":"r1","sent_at":"2024-01-01T00:00:00Z","items":[{"v":1,"trace":"x"},{"v":2,"trace":"y"}],"z":[1]}`)
	b := mustCanon(t, c, "t", `{"z":[1],"items":[{"v":1,"trace":"q"},{"v":2,"trace":"w"}],"sent_at":"2025-06-01T00:00:00Z","request_id":"r2","nonce":"n2","a":1}`)
	if a.Hash != b.Hash || a.IdentityDigest != b.IdentityDigest {
		t.Errorf("calls differing only in ignored fields: hash %x/%x identity %x/%x", a.Hash, b.Hash, a.IdentityDigest, b.IdentityDigest)
	}
	if string(a.Canonical) == string(b.Canonical) {
		t.Error("canonical bytes should keep ignored fields (the record stays faithful)")
	}
	plain := mustCanon(t, c, "t", `{"a":1,"items":[{"v":1},{"v":2}],"z":[1]}`)
	if plain.Hash != a.Hash {
		t.Error("an ignored member should hash as if it were absent")
	}
	d := mustCanon(t, c, "t", `{"a":2,"nonce":"n1","request_id":"r1","sent_at":"2024-01-01T00:00:00Z","items":[{"v":1,"trace":"x"},{"v":2,"trace":"y"}],"z":[1]}`)
	if d.Hash == a.Hash {
		t.Error("a change in an identity field was hidden by the ignored ones")
	}
}

func TestIdentityNormalization(t *testing.T) {
	schema := `{"type":"object","properties":{"amount":{"type":"number"},"code":{"type":"string"},"name":{"type":"string"}}}`
	off := DefaultConfig()
	off.Tools = map[string]ToolConfig{"pay": {Schema: json.RawMessage(schema)}}
	on := DefaultConfig()
	on.Tools = map[string]ToolConfig{"pay": {
		Schema:    json.RawMessage(schema),
		Normalize: Normalize{NumberStrings: true},
		Fields:    map[string]FieldRule{"code": {Normalize: Normalize{FoldCase: true, Trim: true}}},
	}}
	a := `{"amount":"12.50","code":" ABC  def ","name":"Bob"}`
	b := `{"amount":12.5,"code":"abc def","name":"Bob"}`
	cOff, cOn := mustNew(t, off), mustNew(t, on)
	if x, y := mustCanon(t, cOff, "pay", a), mustCanon(t, cOff, "pay", b); x.IdentityDigest == y.IdentityDigest {
		t.Error("without normalization, differently spelled identity values share a digest")
	}
	x, y := mustCanon(t, cOn, "pay", a), mustCanon(t, cOn, "pay", b)
	if x.IdentityDigest != y.IdentityDigest {
		t.Error("with normalization switched on, \"12.50\"/12.5 and \" ABC  def \"/\"abc def\" should share a digest")
	}
	if x.Hash == y.Hash {
		t.Error("normalization must not touch the exact hash")
	}
	// Case folding applies only where switched on.
	if p, q := mustCanon(t, cOn, "pay", `{"amount":1,"code":"x","name":"Bob"}`), mustCanon(t, cOn, "pay", `{"amount":1,"code":"x","name":"BOB"}`); p.IdentityDigest == q.IdentityDigest {
		t.Error("name was case-folded without being configured")
	}
}

func TestTextView(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	call := mustCanon(t, c, "send_email", `{"to":"a@b.co","subject":"Quarterly numbers","body":"Hi Ann,\n\n  the numbers   are in.","notes":["first note here","second one"]}`)
	want := "send_email\nbody: Hi Ann, the numbers are in.\nnotes[0]: first note here\nnotes[1]: second one\nsubject: Quarterly numbers"
	if call.TextView() != want {
		t.Errorf("text view:\n%s\nwant:\n%s", call.TextView(), want)
	}
	if !call.HasText() || call.TextTruncated() {
		t.Errorf("HasText %v TextTruncated %v", call.HasText(), call.TextTruncated())
	}
	if id := mustCanon(t, c, "delete", `{"id":42}`); id.HasText() || id.TextView() != "delete" {
		t.Errorf("identity-only call: HasText %v, view %q", id.HasText(), id.TextView())
	}

	cfg := DefaultConfig()
	cfg.MaxTextView = 40
	small := mustNew(t, cfg)
	long := mustCanon(t, small, "t", `{"body":"`+strings.Repeat("é word ", 20)+`"}`)
	if len(long.TextView()) > 40 || !long.TextTruncated() {
		t.Errorf("view of %d bytes, truncated=%v; want ≤ 40 and true", len(long.TextView()), long.TextTruncated())
	}
	if !strings.HasPrefix(long.TextView(), "t\nbody: é word") || !utf8Valid(long.TextView()) {
		t.Errorf("truncated view %q is not a clean prefix", long.TextView())
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

func TestConfigValidation(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.MaxBytes = 0 },
		func(c *Config) { c.MaxDepth = -1 },
		func(c *Config) { c.MaxLeaves = 0 },
		func(c *Config) { c.MaxStringBytes = 0 },
		func(c *Config) { c.MaxTextView = 0 },
		func(c *Config) { c.Tools = map[string]ToolConfig{"": {}} },
		func(c *Config) { c.Tools = map[string]ToolConfig{"t": {Schema: json.RawMessage(`{"x":`)}} },
		func(c *Config) {
			c.Tools = map[string]ToolConfig{"t": {Schema: json.RawMessage(`{"properties":{"a":{"$ref":"#/nope"}}}`)}}
		},
		func(c *Config) {
			c.Tools = map[string]ToolConfig{"t": {Fields: map[string]FieldRule{"": {Class: Text}}}}
		},
	}
	for i, mutate := range bad {
		cfg := DefaultConfig()
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("case %d: New accepted an invalid config", i)
		}
	}
}

func TestRecursiveSchemaTerminates(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Tools = map[string]ToolConfig{"t": {Schema: json.RawMessage(`{"$ref":"#"}`)}}
	if _, err := New(cfg); err == nil {
		t.Error("a schema that references itself forever was accepted")
	}
}

func TestParseTools(t *testing.T) {
	openai := `[{"type":"function","function":{"name":"a","description":"A","parameters":{"type":"object"}}}]`
	mcp := `[{"name":"b","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false}}]`
	bare := `{"name":"c","parameters":{"type":"object"}}`
	for _, in := range []string{openai, mcp, bare} {
		tools, err := ParseTools([]byte(in))
		if err != nil || len(tools) != 1 || len(tools[0].Schema) == 0 {
			t.Errorf("ParseTools(%s) = %+v, %v", in, tools, err)
		}
	}
	tools, _ := ParseTools([]byte(mcp))
	if tools[0].ReadOnly == nil || !*tools[0].ReadOnly || tools[0].Destructive == nil || *tools[0].Destructive {
		t.Errorf("annotations not read: %+v", tools[0])
	}
	for _, bad := range []string{`[{"description":"x"}]`, `[{"name":"a"},{"name":"a"}]`, `{`, `[{"name":"a","parameters":{"$ref":"#/x"}}]`} {
		if _, err := ParseTools([]byte(bad)); err == nil {
			t.Errorf("ParseTools(%s) accepted bad input", bad)
		}
	}
}

// TestCallOutlivesItsInput: a Call holds nothing of the caller's buffer:
// overwriting the arguments afterwards changes nothing in it.
func TestCallOutlivesItsInput(t *testing.T) {
	c := mustNew(t, DefaultConfig())
	args := []byte(`{"to":"ann@example.com","subject":"Your invoice for May","body":"Hi Ann, your invoice is attached.","amount":"12.50","when":"March 1st","tags":["a","b"]}`)
	call, err := c.Canonicalize("send_email", args)
	if err != nil {
		t.Fatal(err)
	}
	canonical, view := string(call.Canonical), call.TextView()
	fields := make([]Field, len(call.Fields))
	for i, f := range call.Fields {
		fields[i] = Field{Path: strings.Clone(f.Path), Class: f.Class, Rule: strings.Clone(f.Rule), Value: strings.Clone(f.Value), Typed: strings.Clone(f.Typed)}
	}
	for i := range args {
		args[i] = 'X'
	}
	if string(call.Canonical) != canonical || call.TextView() != view {
		t.Fatal("the call changed with its input")
	}
	for i, f := range call.Fields {
		if f != fields[i] {
			t.Errorf("field %d changed with the input: %+v, was %+v", i, f, fields[i])
		}
	}
	// The name caches kept their own copies of the keys.
	again, err := c.Canonicalize("send_email", []byte(`{"to":"bob@example.com","subject":"Hello there, Bob"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := classes(again); got["subject"] != "text heuristic:name=subject" {
		t.Errorf("subject after the first input was overwritten: %q", got["subject"])
	}
}

// TestHashHex: the API's hex of a hash, as %016x writes it, at the ends
// of the range and where padding matters.
func TestHashHex(t *testing.T) {
	for _, h := range []uint64{0, 1, 0xf, 0x10, 0xabc, 1 << 63, 0xdeadbeefcafef00d, ^uint64(0)} {
		if got, want := HashHex(h), fmt.Sprintf("%016x", h); got != want {
			t.Errorf("HashHex(%#x) = %q, want %q", h, got, want)
		}
	}
}
