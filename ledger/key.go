package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on identifiers, so a key always fits a store's key size.
const (
	MaxTenantBytes = 256  // longest tenant id
	MaxKeyBytes    = 1024 // longest key, namespace and derived suffix included
)

// KeyInput is what a key is derived from; a plain value.
type KeyInput struct {
	// IdempotencyKey is the caller's explicit key. When set, the key is
	// the explicit key's namespace of Tool: the same explicit key on
	// another tool is another key, and Workflow and Step are not used.
	IdempotencyKey string
	// Workflow, Step and Tool give the positional key workflow:step:tool
	// when no explicit key is given. Workflow and Step must not contain
	// ':' or '#', Tool must not contain '#', so that two positions never
	// share a key.
	Workflow, Step, Tool string
	// Sampling marks a retry that wants a fresh answer. It gets the derived
	// key base#s<Attempt>, or base#e<digest of PreviousError> when Attempt
	// is 0. A retry without Sampling (a transient retry) keeps the base key
	// and is answered from the record.
	Sampling      bool
	Attempt       int
	PreviousError []byte
}

// KeyFor derives the ledger key of a call. Errors are *FieldError values
// (matching ErrInvalidInput or ErrTooLarge) that name the offending field.
//
// Three namespaces, which can never alias:
//
//   - positional: workflow:step:tool (run-7:3:send_email). Workflow and
//     step hold no ':' or '#' and tool no '#', so the first two colons
//     split it and no '#' comes before a derived suffix.
//   - explicit: '#', then the tool and the caller's key, each preceded by
//     its length in bytes and a ':' and followed by a ':' for the tool:
//     #4:ship:8:order-77. A positional key never starts with '#' (its
//     workflow may not hold one), and the lengths delimit both parts, so
//     no explicit key can spell another tool's key, a position, or a
//     derived key.
//   - derived: a sampling retry's key is its base key (either kind)
//     followed by #s<attempt> or #e<16 hex digits>. Only KeyFor appends
//     it: the caller's bytes sit inside a length, never at the end.
//
// Every part must be valid UTF-8 without control characters (NUL, CR, LF,
// …): a key is passed downstream and printed in logs.
func KeyFor(in KeyInput) (string, error) {
	var base string
	if in.IdempotencyKey != "" {
		if err := checkPart("idempotency_key", in.IdempotencyKey); err != nil {
			return "", err
		}
		if in.Tool == "" {
			return "", invalid("tool", "empty")
		}
		if err := checkPart("tool", in.Tool); err != nil {
			return "", err
		}
		base = explicitKey(in.Tool, in.IdempotencyKey)
		if len(base)+maxSuffix > MaxKeyBytes {
			limit := MaxKeyBytes - maxSuffix - (len(base) - len(in.IdempotencyKey))
			return "", tooLarge("idempotency_key", len(in.IdempotencyKey), max(limit, 0))
		}
	} else {
		for _, p := range []struct{ name, v, bad string }{
			{"workflow_id", in.Workflow, ":#"},
			{"step_id", in.Step, ":#"},
			{"tool", in.Tool, "#"},
		} {
			if p.v == "" {
				return "", invalid(p.name, "empty (and no idempotency_key given)")
			}
			if err := checkPart(p.name, p.v); err != nil {
				return "", err
			}
			if strings.ContainsAny(p.v, p.bad) {
				return "", invalid(p.name, "must not contain any of "+strconv.Quote(p.bad))
			}
		}
		base = in.Workflow + ":" + in.Step + ":" + in.Tool
	}
	key := base
	if in.Sampling {
		switch {
		case in.Attempt > 0:
			key += "#s" + strconv.Itoa(in.Attempt)
		case in.Attempt < 0:
			return "", invalid("attempt", "negative")
		case len(in.PreviousError) > 0:
			sum := sha256.Sum256(in.PreviousError)
			key += "#e" + hex.EncodeToString(sum[:8])
		default:
			return "", invalid("attempt", "a sampling retry needs an attempt number or the previous error")
		}
	}
	if err := checkKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// maxSuffix is the longest derived suffix: "#s" and a 64-bit attempt, or
// "#e" and 16 hex digits.
const maxSuffix = 2 + 19

// explicitKey is the explicit key's namespace of tool: #len:tool:len:key.
func explicitKey(tool, key string) string {
	return fmt.Sprintf("#%d:%s:%d:%s", len(tool), tool, len(key), key)
}

// parseExplicit splits a key of the explicit namespace into its tool, the
// caller's key and the derived suffix ("" for none); ok is false for a
// key of another form.
func parseExplicit(k string) (tool, key, suffix string, ok bool) {
	if !strings.HasPrefix(k, "#") {
		return "", "", "", false
	}
	rest := k[1:]
	part := func() (string, bool) {
		digits, after, found := strings.Cut(rest, ":")
		n, err := strconv.Atoi(digits)
		if !found || err != nil || n < 0 || n > len(after) || digits != strconv.Itoa(n) {
			return "", false
		}
		rest = after[n:]
		return after[:n], true
	}
	if tool, ok = part(); !ok || !strings.HasPrefix(rest, ":") {
		return "", "", "", false
	}
	rest = rest[1:]
	if key, ok = part(); !ok || (rest != "" && !isSuffix(rest)) {
		return "", "", "", false
	}
	return tool, key, rest, true
}

// isSuffix reports whether s is a derived suffix: #s<digits> or #e<16 hex>.
func isSuffix(s string) bool {
	if len(s) < 3 || s[0] != '#' {
		return false
	}
	rest := s[2:]
	switch s[1] {
	case 's':
		return strings.Trim(rest, "0123456789") == ""
	case 'e':
		return len(rest) == 16 && strings.Trim(rest, "0123456789abcdef") == ""
	}
	return false
}

// BaseKey strips a sampling retry's derived suffix from key, in either
// namespace, and returns key unchanged when it has none. For a key of
// neither form (one written before explicit keys had their namespace) it
// strips a trailing #s<n> or #e<hex>, as keys were read then.
func BaseKey(key string) string {
	if _, _, suffix, ok := parseExplicit(key); ok {
		return key[:len(key)-len(suffix)]
	}
	i := strings.LastIndexByte(key, '#')
	if i >= 0 && isSuffix(key[i:]) {
		return key[:i]
	}
	return key
}

// legacyKey returns the key that a key of the explicit namespace was
// stored under before explicit keys had their namespace (the caller's key
// and the derived suffix, as given), and the tool the new form names; ok
// is false for a key of another form.
func legacyKey(k string) (legacy, tool string, ok bool) {
	tool, key, suffix, ok := parseExplicit(k)
	if !ok {
		return "", "", false
	}
	return key + suffix, tool, true
}

// positional reports whether r's key is the positional key of its own
// workflow, step and tool (possibly with a derived suffix).
func positional(r *Record) bool {
	return r.Workflow != "" && BaseKey(r.Key) == r.Workflow+":"+r.Step+":"+r.Tool
}

func checkTenant(tenant string) error {
	return checkID("tenant", tenant, MaxTenantBytes)
}

func checkKey(key string) error {
	return checkID("key", key, MaxKeyBytes)
}

// CheckKey reports what is wrong with key, a ledger key given back by a
// caller, naming field: empty, longer than MaxKeyBytes, invalid UTF-8 or
// a control character.
func CheckKey(field, key string) error {
	return checkID(field, key, MaxKeyBytes)
}

func checkID(field, v string, limit int) error {
	switch {
	case v == "":
		return invalid(field, "empty")
	case len(v) > limit:
		return tooLarge(field, len(v), limit)
	}
	return checkPart(field, v)
}

// checkPart refuses invalid UTF-8 and control characters.
func checkPart(field, v string) error {
	if !utf8.ValidString(v) {
		return invalid(field, "not valid UTF-8")
	}
	for i, r := range v {
		if unicode.IsControl(r) {
			return invalid(field, fmt.Sprintf("control character %U at byte %d", r, i))
		}
	}
	return nil
}
