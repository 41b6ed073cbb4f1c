package mcpgate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idem-dev/idem/ledger"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestParseCall(t *testing.T) {
	id, _ := jsonrpc.MakeID(float64(7))
	tests := []struct {
		name, params           string
		tool, key, confirmed   string
		args, fwdArgs, errPart string
	}{
		{name: "plain", params: `{"name":"send","arguments":{"to":"a@b.c"}}`, tool: "send", args: `{"to":"a@b.c"}`},
		{name: "no arguments", params: `{"name":"ping"}`, tool: "ping", args: `{}`},
		{name: "client key", params: `{"name":"send","arguments":{},"_meta":{"idempotencyKey":"k-1","progressToken":3}}`, tool: "send", key: "k-1", args: `{}`},
		{name: "confirmation stripped", params: `{"name":"send","arguments":{"to":"a<b>","idem_confirmed":"run:1:send"},"_meta":{"progressToken":"p"}}`,
			tool: "send", confirmed: "run:1:send", args: `{"to":"a<b>"}`, fwdArgs: `{"to":"a<b>"}`},
		{name: "confirmation in _meta", params: `{"name":"send","arguments":{"x":1},"_meta":{"idem/confirmed":"k"}}`, tool: "send", confirmed: "k", args: `{"x":1}`},
		{name: "no name", params: `{"arguments":{}}`, errPart: "params.name"},
		{name: "arguments not an object", params: `{"name":"send","arguments":[1]}`, errPart: "params.arguments"},
		{name: "key not a string", params: `{"name":"send","_meta":{"idempotencyKey":5}}`, errPart: "idempotencyKey"},
		{name: "confirmation not a string", params: `{"name":"send","arguments":{"idem_confirmed":true}}`, errPart: "idem_confirmed"},
		{name: "not an object", params: `[]`, errPart: "params"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := parseCall(&jsonrpc.Request{ID: id, Method: "tools/call", Params: json.RawMessage(tt.params)})
			if tt.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("err = %v, want one naming %s", err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.tool != tt.tool || tc.key != tt.key || tc.confirmed != tt.confirmed || string(tc.args) != tt.args {
				t.Errorf("got tool %q key %q confirmed %q args %s", tc.tool, tc.key, tc.confirmed, tc.args)
			}
			if tt.fwdArgs != "" {
				var fwd struct {
					Arguments json.RawMessage `json:"arguments"`
					Meta      map[string]any  `json:"_meta"`
				}
				json.Unmarshal(tc.fwd.Params, &fwd)
				if string(fwd.Arguments) != tt.fwdArgs || fwd.Meta["progressToken"] != "p" || tc.fwd.ID != id {
					t.Errorf("forwarded %s, want arguments %s and the rest kept", tc.fwd.Params, tt.fwdArgs)
				}
			} else if tc.fwd != tc.req {
				t.Error("a call without the reserved argument is not forwarded as it came")
			}
		})
	}
}

func TestClassifyToolError(t *testing.T) {
	tests := []struct {
		text string
		sc   string
		want ledger.ErrorClass
	}{
		{text: "Entity with name Ann not found", want: ledger.ClassPermanent},
		{text: "the mail service is temporarily unavailable (status 503)", want: ledger.ClassTransient},
		{text: "upstream returned HTTP 404", want: ledger.ClassPermanent},
		{text: "rate limit exceeded, try again later", want: ledger.ClassTransient},
		{text: "order 404 could not be shipped", want: ledger.ClassTransient}, // a number, not a status
		{text: "Unexpected token 'o', \"{not json\" is not valid JSON", want: ledger.ClassTransient},
		{text: "something odd happened", want: ledger.ClassTransient},
		{text: "failed", sc: `{"status":409}`, want: ledger.ClassPermanent},
		{text: "failed", sc: `{"statusCode":502}`, want: ledger.ClassTransient},
	}
	for _, tt := range tests {
		r := map[string]any{"content": []map[string]string{{"type": "text", "text": tt.text}}, "isError": true}
		if tt.sc != "" {
			r["structuredContent"] = json.RawMessage(tt.sc)
		}
		b, _ := json.Marshal(r)
		if got := classifyToolError(b); got != tt.want {
			t.Errorf("%q %s: %v, want %v", tt.text, tt.sc, got, tt.want)
		}
	}
}

func FuzzParseCall(f *testing.F) {
	for _, s := range []string{
		`{"name":"send","arguments":{"to":"a@b.c","idem_confirmed":"k"},"_meta":{"idempotencyKey":"x"}}`,
		`{"name":"x"}`, `{}`, `null`, `[]`, `{"name":"a","arguments":"{}"}`, `{"name":"a","_meta":null}`,
	} {
		f.Add([]byte(s))
	}
	id, _ := jsonrpc.MakeID("f")
	f.Fuzz(func(t *testing.T, params []byte) {
		tc, err := parseCall(&jsonrpc.Request{ID: id, Method: "tools/call", Params: params})
		if err != nil {
			return
		}
		var args map[string]json.RawMessage
		if json.Unmarshal(tc.args, &args) != nil || args == nil {
			t.Fatalf("accepted arguments that are not an object: %s", tc.args)
		}
		if _, ok := args[ConfirmArgument]; ok {
			t.Fatalf("the reserved argument reached the check: %s", tc.args)
		}
		if !json.Valid(tc.fwd.Params) {
			t.Fatalf("forwarded params are not JSON: %s", tc.fwd.Params)
		}
	})
}

func FuzzReadResult(f *testing.F) {
	for _, s := range []string{`{"content":[{"type":"text","text":"x"}]}`, `{"content":null}`, `"x"`, `{"content":[1],"isError":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, ok := readResult(b); ok {
			r.text()
			classifyToolError(b)
			needsInput(b)
			withMeta(b, map[string]any{"idem/replayed": true})
		}
	})
}
