package server_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/funnel"
)

// TestReplayedResultKeepsItsBytes: a duplicate hands back the recorded
// result as it was recorded, characters that HTML escapes included. The
// answer used to be written through Result.MarshalJSON, whose inner
// json.Marshal escaped them ("<b>" came back as "\u003cb\u003e").
func TestReplayedResultKeepsItsBytes(t *testing.T) {
	e := start(t, options{})
	const result = `{"html":"<b>Tom & Jerry</b>","n":1}`
	call := `{"session_id":"s","workflow_id":"wf","step_id":"1","tool":"post_page","arguments":{"page":"p-1","title":"a <b> & c"}}`
	e.complete(e.do(call, "execute"), result)
	a := e.do(call, "duplicate")
	if a.Match == nil || string(a.Match.Result) != result {
		t.Fatalf("replayed result %s, want %s", a.Match.Result, result)
	}
}

// TestClientKeepsTheResultsBytes: through the Go client, a result
// completed with characters that HTML escapes is replayed as it was
// given (the client's json.Marshal escaped them on the way in).
func TestClientKeepsTheResultsBytes(t *testing.T) {
	e := start(t, options{})
	c := e.client("")
	ctx := t.Context()
	const result = `{"html":"<b>Tom & Jerry</b>"}`
	req := client.CheckRequest{SessionID: "s", WorkflowID: "wf", StepID: "1", Tool: "post_page", Arguments: json.RawMessage(`{"page":"p-1"}`)}
	r, err := c.Check(ctx, req)
	if err != nil || r.Decision != client.Execute {
		t.Fatalf("first check: %+v %v", r, err)
	}
	if _, err := c.Complete(ctx, r.Key, r.Token, json.RawMessage(result)); err != nil {
		t.Fatal(err)
	}
	again, err := c.Check(ctx, req)
	if err != nil || again.Decision != client.Duplicate || again.Match == nil {
		t.Fatalf("second check: %+v %v", again, err)
	}
	if string(again.Match.Result) != result {
		t.Fatalf("replayed %s, want %s", again.Match.Result, result)
	}
}

// TestResultWire: Result.Wire encodes to what json.Marshal writes for the
// Result (the form the API documents), down to the byte when HTML
// escaping is the same.
func TestResultWire(t *testing.T) {
	r := funnel.Result{
		Decision: funnel.Duplicate, Stage: funnel.StageKey, Key: "wf:1:post_page", Policy: "default", Reason: "replayed <b>",
		Match: &funnel.Match{Key: "wf:1:post_page", Tool: "post_page", Status: "success", Result: json.RawMessage(`{"a": [1, 2]}`), Similarity: 1},
		Notes: []string{"a note"}, Hash: 0xabc, IdentityDigest: 0x1234567890abcdef, TimingsUS: map[string]int64{"total": 7},
	}
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(r.Wire()); err != nil {
		t.Fatal(err)
	}
	if got := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
		t.Fatalf("Wire encodes to\n%s\njson.Marshal to\n%s", got, want)
	}
	for _, part := range []string{`"hash":"0000000000000abc"`, `"identity_digest":"1234567890abcdef"`, `"result":{"a":[1,2]}`} {
		if !bytes.Contains(want, []byte(part)) {
			t.Errorf("%s lacks %s", want, part)
		}
	}
}
