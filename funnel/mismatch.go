package funnel

import (
	"fmt"
	"slices"
	"strings"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/ledger"
)

// keyMismatch is what the key stage makes of a record under the call's
// own key that holds another call (other canonical bytes). The rule:
//
//   - equal identity fields (a reworded text, a restated value): the key
//     decides, as for any retry, with a note;
//   - an explicit key with other identity fields: refused under a strict
//     policy (ErrKeyReuse, a 422: the default, as the IETF
//     Idempotency-Key draft answers), else the key decides, with a note;
//   - a positional key with other identity fields: confirm, naming the
//     fields (the position is the anchor for a reworded retry, but "sent
//     to A" is not the answer to a call for B), unless the policy says
//     on_key_mismatch: replay.
type keyMismatch struct {
	refuse  bool     // ErrKeyReuse
	confirm bool     // answer confirm
	fields  []string // the identity paths that differ, when known
	note    string   // otherwise: the note the answer carries
}

// maxNamedFields bounds the fields a mismatch names.
const maxNamedFields = 8

// keyMismatchOf compares call with rec, the record under the call's own
// key; explicit says the key is the caller's idempotency key. earlier
// reads rec's call back (nil when it cannot), and is called only when the
// identity fields differ, to name them.
func keyMismatchOf(pol *Policy, explicit bool, call *canon.Call, rec *ledger.Record, earlier func() *canon.Call) keyMismatch {
	const differ = "arguments differ from the call recorded under this key; the key decides"
	if call.IdentityDigest == rec.Identity {
		return keyMismatch{note: differ + " (its identity fields are equal)"}
	}
	m := keyMismatch{}
	if e := earlier(); e != nil {
		m.fields = identityDiff(call, e)
	}
	switch {
	case explicit && pol.Strict:
		m.refuse = true
	case !explicit && pol.OnKeyMismatch != ActionReplay:
		m.confirm = true
	default:
		m.note = differ + " (identity fields differ: " + m.named() + ")"
	}
	return m
}

// named lists the differing fields for a message.
func (m *keyMismatch) named() string {
	if len(m.fields) == 0 {
		return "which ones could not be read back"
	}
	if len(m.fields) > maxNamedFields {
		return strings.Join(m.fields[:maxNamedFields], ", ") + fmt.Sprintf(" and %d more", len(m.fields)-maxNamedFields)
	}
	return strings.Join(m.fields, ", ")
}

// apply writes the mismatch into res: a note, or a confirm against match
// (done); or it returns the ErrKeyReuse refusal for key.
func (m *keyMismatch) apply(res *Result, key string, match *Match) (done bool, err error) {
	switch {
	case m.refuse:
		return false, fmt.Errorf("%w: key %q: identity fields differ: %s", ErrKeyReuse, key, m.named())
	case m.confirm:
		// The other call's outcome is not this call's: it is not handed back.
		match.Result, match.Error, match.ErrorClass = nil, nil, ""
		res.Decision, res.Stage, res.Match = Confirm, StageKey, match
		res.Reason = "another call was recorded at this position (identity fields differ: " + m.named() +
			"): confirm before executing; a call meant to run as well needs a step of its own"
		return true, nil
	}
	res.Notes = append(res.Notes, m.note)
	return false, nil
}

// identityDiff names the identity fields of a and b that differ: present
// in one only, or of other values (their typed forms when both have one).
// A leaf that normalization alone makes equal may be named; the digests
// decide whether they differ at all.
func identityDiff(a, b *canon.Call) []string {
	of := func(c *canon.Call) map[string]*canon.Field {
		m := make(map[string]*canon.Field, len(c.Fields))
		for i := range c.Fields {
			if f := &c.Fields[i]; f.Class == canon.Identity {
				m[f.Path] = f
			}
		}
		return m
	}
	fa, fb := of(a), of(b)
	var out []string
	for p, x := range fa {
		y, ok := fb[p]
		if !ok || !sameIdentity(x, y) {
			out = append(out, p)
		}
	}
	for p := range fb {
		if _, ok := fa[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func sameIdentity(x, y *canon.Field) bool {
	if x.Typed != "" || y.Typed != "" {
		return x.Typed == y.Typed
	}
	return x.Value == y.Value
}
