package mcpgate

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/idem-dev/idem/ledger"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// classifyRPCError classes a JSON-RPC error answer to a tools/call: a
// request the upstream cannot read, a method or tool it does not have,
// or arguments it refuses will fail again (permanent); anything else (an
// internal error, a server-defined code) may not (transient).
func classifyRPCError(we *jsonrpc.Error) ledger.ErrorClass {
	switch we.Code {
	case jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
		return ledger.ClassPermanent
	}
	return ledger.ClassTransient
}

// statusInText finds an HTTP status the text names as one ("status 503",
// "HTTP 404", "error code: 429", "(409)"), not any three-digit number.
var statusInText = regexp.MustCompile(`(?i)(?:\bstatus(?:[ _-]?code)?|\bhttp(?:/[0-9.]+)?|\berror(?:[ _-]?code)?|\bcode)\W{0,3}([1-5][0-9]{2})\b`)

// Words of error results that say the failure may pass, and that it will
// not. Checked in this order: "temporarily unavailable" is transient even
// though "unavailable" alone is too.
var (
	transientWords = []string{
		"timeout", "timed out", "deadline exceeded", "temporarily", "temporary", "try again", "retry later",
		"rate limit", "rate-limit", "too many requests", "unavailable", "overloaded", "busy",
		"connection refused", "connection reset", "econnrefused", "econnreset", "etimedout", "eai_again", "network",
	}
	permanentWords = []string{
		"not found", "does not exist", "doesn't exist", "unknown tool", "invalid", "malformed", "validation",
		"unauthorized", "unauthorised", "forbidden", "permission denied", "access denied", "eacces",
		"already exists", "conflict", "unprocessable", "bad request", "not allowed", "not supported",
	}
)

// classifyToolError classes a tool error result by its content: an HTTP
// status it names (in structuredContent's status, statusCode, status_code
// or code, or in its text), then words that say the failure will pass or
// will not; unknown is transient (ledger's rule: an unknown failure may be
// retried).
func classifyToolError(result json.RawMessage) ledger.ErrorClass {
	r, ok := readResult(result)
	if !ok {
		return ledger.ClassTransient
	}
	var sc map[string]any
	if json.Unmarshal(r.StructuredContent, &sc) == nil {
		for _, k := range []string{"status", "statusCode", "status_code", "httpStatus", "code"} {
			if f, ok := sc[k].(float64); ok && f >= 100 && f < 600 {
				return ledger.ClassifyStatus(int(f))
			}
		}
	}
	text := strings.ToLower(r.text())
	if m := statusInText.FindStringSubmatch(text); m != nil {
		code := int(m[1][0]-'0')*100 + int(m[1][1]-'0')*10 + int(m[1][2]-'0')
		if code >= 400 {
			return ledger.ClassifyStatus(code)
		}
	}
	for _, w := range transientWords {
		if strings.Contains(text, w) {
			return ledger.ClassTransient
		}
	}
	for _, w := range permanentWords {
		if strings.Contains(text, w) {
			return ledger.ClassPermanent
		}
	}
	return ledger.ClassTransient
}
