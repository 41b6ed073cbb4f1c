package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on identifiers, so a key always fits a store's key size.
const (
	MaxTenantBytes = 256  // longest tenant id
	MaxKeyBytes    = 1024 // longest key, derived suffix included
)

// KeyInput is what a key is derived from; a plain value.
type KeyInput struct {
	// IdempotencyKey is the caller's explicit key. When set it is the base
	// key and Workflow, Step and Tool are not used for it.
	IdempotencyKey string
	// Workflow, Step and Tool give the base key workflow:step:tool when no
	// explicit key is given. Workflow and Step must not contain ':' or '#',
	// Tool must not contain '#', so that two positions never share a key.
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
// (matching ErrInvalidInput) that name the offending field.
func KeyFor(in KeyInput) (string, error) {
	var base string
	if in.IdempotencyKey != "" {
		base = in.IdempotencyKey
	} else {
		for _, p := range []struct{ name, v, bad string }{
			{"workflow_id", in.Workflow, ":#"},
			{"step_id", in.Step, ":#"},
			{"tool", in.Tool, "#"},
		} {
			if p.v == "" {
				return "", invalid(p.name, "empty (and no idempotency_key given)")
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

func checkTenant(tenant string) error {
	return checkID("tenant", tenant, MaxTenantBytes)
}

func checkKey(key string) error {
	return checkID("key", key, MaxKeyBytes)
}

func checkID(field, v string, limit int) error {
	switch {
	case v == "":
		return invalid(field, "empty")
	case len(v) > limit:
		return tooLarge(field, len(v), limit)
	case !utf8.ValidString(v):
		return invalid(field, "not valid UTF-8")
	}
	return nil
}
