package mcpgate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/idem-dev/idem/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// resultShape is what the gateway reads of a tool result.
type resultShape struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// readResult reads a tools/call result: a JSON object whose content is
// an array of content blocks.
func readResult(b json.RawMessage) (*resultShape, bool) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(b, &probe) != nil || probe == nil {
		return nil, false
	}
	if c, ok := probe["content"]; !ok || !strings.HasPrefix(strings.TrimSpace(string(c)), "[") {
		return nil, false
	}
	var r resultShape
	if json.Unmarshal(b, &r) != nil {
		return nil, false
	}
	return &r, true
}

// needsInput reports a result that asks the client for input before the
// call can run (resultType input_required, SEP-2322).
func needsInput(b json.RawMessage) bool {
	var r struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(b, &r) == nil && r.ResultType == "input_required"
}

// text is the result's text content, joined.
func (r *resultShape) text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" && c.Text != "" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// withMeta returns result (a JSON object) with meta merged into its
// _meta.
func withMeta(result json.RawMessage, meta map[string]any) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(result, &obj) != nil || obj == nil {
		return result
	}
	m := map[string]any{}
	if raw, ok := obj["_meta"]; ok {
		json.Unmarshal(raw, &m)
		if m == nil {
			m = map[string]any{}
		}
	}
	for k, v := range meta {
		m[k] = v
	}
	b, err := marshal(m)
	if err != nil {
		return result
	}
	obj["_meta"] = b
	out, err := marshal(obj)
	if err != nil {
		return result
	}
	return out
}

func replayMeta(res *client.Result) map[string]any {
	meta := map[string]any{"idem/replayed": true, "idem/decision": res.Decision, "idem/stage": res.Stage, "idem/key": matchKey(res)}
	if m := res.Match; m != nil && m.Similarity > 0 && m.Similarity < 1 {
		meta["idem/similarity"] = m.Similarity
	}
	return meta
}

// replayResult is a recorded result as a tool result: as recorded when it
// is one (a call through the gateway), else wrapped in one.
func replayResult(recorded json.RawMessage, res *client.Result) json.RawMessage {
	if _, ok := readResult(recorded); ok {
		return withMeta(recorded, replayMeta(res))
	}
	var obj map[string]json.RawMessage
	r := map[string]any{"content": []map[string]string{{"type": "text", "text": string(orNull(recorded))}}}
	if json.Unmarshal(recorded, &obj) == nil && obj != nil {
		r["structuredContent"] = recorded
	}
	b, _ := marshal(r)
	return withMeta(b, replayMeta(res))
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

// replayFailure answers with a recorded permanent failure: the upstream's
// JSON-RPC error or error result as it was, else a tool error quoting it.
func replayFailure(tc *toolCall, res *client.Result) *jsonrpc.Response {
	recorded := res.Match.Error
	var wrapped struct {
		RPC *jsonrpc.Error `json:"jsonrpc_error"`
	}
	if json.Unmarshal(recorded, &wrapped) == nil && wrapped.RPC != nil {
		return &jsonrpc.Response{ID: tc.req.ID, Error: wrapped.RPC}
	}
	if _, ok := readResult(recorded); ok {
		return &jsonrpc.Response{ID: tc.req.ID, Result: withMeta(recorded, replayMeta(res))}
	}
	text := fmt.Sprintf("idem: this call of %s already failed permanently (key %q), so it was not run again. Its error was: %s",
		tc.tool, matchKey(res), orNull(recorded))
	return &jsonrpc.Response{ID: tc.req.ID, Result: errorResult(text, replayMeta(res))}
}

// errorResult is a tool error result with text for the model.
func errorResult(text string, meta map[string]any) json.RawMessage {
	r := map[string]any{
		"content": []map[string]string{{"type": "text", "text": text}},
		"isError": true,
	}
	if len(meta) > 0 {
		r["_meta"] = meta
	}
	b, _ := marshal(r)
	return b
}

// wireError is a response's error as JSON-RPC writes it.
func wireError(err error) *jsonrpc.Error {
	if we, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return we
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
}
