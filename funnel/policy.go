package funnel

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/idem-dev/idem/pairscore"
)

// Action is what a semantic or judged duplicate becomes.
type Action string

// The actions.
const (
	// ActionReplay answers duplicate and hands back the earlier call's result.
	ActionReplay Action = "replay"
	// ActionConfirm answers confirm: the agent should ask before executing.
	ActionConfirm Action = "confirm"
	// ActionWarn answers execute, and reports the earlier call it resembles.
	ActionWarn Action = "warn"
)

// Fallback is what a check decides when the judge cannot answer (off,
// error, timeout) for a call in the ambiguous band (Policy.Fallback), or
// when a candidate could not be compared at all (Policy.Uncompared).
type Fallback string

// The fallbacks.
const (
	// FallbackExecute lets the call execute (and reports the near match).
	FallbackExecute Fallback = "execute"
	// FallbackConfirm asks the agent to confirm.
	FallbackConfirm Fallback = "confirm"
)

// IdentityMode is how the identity gate takes restated identity values.
type IdentityMode string

// The identity modes.
const (
	IdentityGraded  IdentityMode = "graded"
	IdentityStrict  IdentityMode = "strict"
	IdentityLenient IdentityMode = "lenient"
)

// Policy is how one action type is decided. Policies are matched in order;
// the first whose tool globs or annotations match a call applies.
type Policy struct {
	// Name names the action type in decisions and metrics.
	Name string `yaml:"name" json:"name"`
	// Tools are globs (path.Match syntax) over tool names: "send_*".
	Tools []string `yaml:"tools,omitempty" json:"tools,omitempty"`
	// ReadOnly, Destructive, Idempotent match the tool's MCP annotations
	// when set: a policy with ReadOnly true matches tools annotated
	// readOnlyHint true.
	ReadOnly    *bool `yaml:"read_only,omitempty" json:"read_only,omitempty"`
	Destructive *bool `yaml:"destructive,omitempty" json:"destructive,omitempty"`
	Idempotent  *bool `yaml:"idempotent,omitempty" json:"idempotent,omitempty"`

	// DuplicateThreshold: cosine at or above which a candidate that passed
	// the identity gate is a duplicate.
	DuplicateThreshold float64 `yaml:"duplicate_threshold" json:"duplicate_threshold"`
	// AmbiguousThreshold: cosine at or above which (and below the
	// duplicate threshold) the judge decides.
	AmbiguousThreshold float64 `yaml:"ambiguous_threshold" json:"ambiguous_threshold"`
	// DuplicateProbability and AmbiguousProbability stand for the two
	// thresholds when the pair scorer is on (its probability that two
	// text views ask for the same effect); 0 takes the scorer's own
	// calibrated thresholds.
	DuplicateProbability float64 `yaml:"duplicate_probability,omitempty" json:"duplicate_probability,omitempty"`
	AmbiguousProbability float64 `yaml:"ambiguous_probability,omitempty" json:"ambiguous_probability,omitempty"`
	// SemanticReplay is the score (cosine, or probability with the pair
	// scorer) at or above which a replay may rest on free-text
	// similarity, as idem bench calibrate writes it for a target
	// precision; 0 (the default) replays only certain matches (exact, or
	// equal identity fields without text): a free-text match executes,
	// with a note. It matters for on_duplicate: replay only.
	SemanticReplay float64 `yaml:"semantic_replay,omitempty" json:"semantic_replay,omitempty"`
	// IdentityGate requires a candidate's identity fields to equal the
	// call's. Turning it off lets embeddings alone decide.
	IdentityGate bool `yaml:"identity_gate" json:"identity_gate"`
	// Identity says how the gate reads identity values another call
	// restated ("March 4th" for 2019-03-04, "$122" for 122, "San Fran"
	// for "San Francisco": canon.Compare's readings): graded (the
	// default, ""): such a candidate may only be asked about (confirm),
	// never replayed; strict: they count as different; lenient: they
	// count as equal.
	Identity IdentityMode `yaml:"identity,omitempty" json:"identity,omitempty"`
	// Semantic turns the exact and semantic stages on; off, only the key
	// decides.
	Semantic bool `yaml:"semantic" json:"semantic"`
	// OnDuplicate is what a semantic or judged duplicate becomes.
	OnDuplicate Action `yaml:"on_duplicate" json:"on_duplicate"`
	// Judge sends the ambiguous band to the judge (when one is configured).
	Judge bool `yaml:"judge" json:"judge"`
	// Fallback applies when the judge cannot answer (none configured, an
	// error, the budget ran out before its answer) for a candidate in the
	// ambiguous band.
	Fallback Fallback `yaml:"fallback" json:"fallback"`
	// Uncompared applies when a candidate that passed the identity gate
	// could not be compared with the call at all: the budget ran out while
	// embedding, the encoder queue was full or would answer too late, the
	// encoder failed, or the session's calls were still loading. Confirm
	// asks; execute runs the call. Either way the answer says so. Empty
	// means execute for a policy of read-only tools (ReadOnly true), else
	// confirm.
	Uncompared Fallback `yaml:"uncompared" json:"uncompared"`
	// Lease overrides the ledger's lease for this action type's claims.
	Lease time.Duration `yaml:"lease,omitempty" json:"lease,omitempty"`
	// Window bounds how far back in the session the exact and semantic
	// stages look; 0 means the whole retention period.
	Window time.Duration `yaml:"window,omitempty" json:"window,omitempty"`
	// Scope is where earlier calls are looked for: session (the default,
	// ""), workflow (every session of the call's workflow: sub-agents
	// re-running a step) or tenant (every session of the tenant: a
	// tenant-wide semantic cache for read-only tools). The identity gate,
	// the thresholds and the contrast guard are the same in every scope.
	Scope ScopeKind `yaml:"scope,omitempty" json:"scope,omitempty"`
	// Strict refuses an explicit idempotency key reused with different
	// identity fields (ErrKeyReuse, a 422) instead of replaying the first
	// call's result; on in the default policies. A reworded text under the
	// key still replays.
	Strict bool `yaml:"strict" json:"strict"`
	// OnKeyMismatch is what a positional key (workflow:step:tool) answers
	// when the record there holds a call with other identity fields (another
	// recipient, another amount): confirm (the default; "" reads as
	// confirm), or replay, the position deciding as for a reworded retry.
	OnKeyMismatch Action `yaml:"on_key_mismatch" json:"on_key_mismatch"`
}

// DefaultPolicies are safe for a service that knows nothing of its tools:
// read-only tools replay a semantic duplicate (a repeated read costs
// nothing) and execute when a candidate could not be compared; every other
// tool asks the agent to confirm a duplicate, rather than block a possibly
// legitimate action silently, and asks too when a candidate could not be
// compared, rather than run a possible duplicate unseen.
func DefaultPolicies() []Policy {
	readOnly := true
	return []Policy{
		{
			Name: "read-only", ReadOnly: &readOnly,
			DuplicateThreshold: 0.9, AmbiguousThreshold: 0.85, IdentityGate: true, Semantic: true,
			OnDuplicate: ActionReplay, Judge: true, Fallback: FallbackExecute, Uncompared: FallbackExecute,
			Strict: true, OnKeyMismatch: ActionConfirm,
		},
		DefaultPolicy(),
	}
}

// DefaultPolicy is the catch-all policy for write actions.
func DefaultPolicy() Policy {
	return Policy{
		Name:               "default",
		DuplicateThreshold: 0.9, AmbiguousThreshold: 0.85, IdentityGate: true, Semantic: true,
		OnDuplicate: ActionConfirm, Judge: true, Fallback: FallbackExecute, Uncompared: FallbackConfirm,
		Strict: true, OnKeyMismatch: ActionConfirm,
	}
}

// Thresholds returns the duplicate and ambiguous thresholds p decides
// with, on the scale of the candidates' scores. With the pair scorer
// (scorer, its own thresholds) they are probabilities, p's where it sets
// them; without (scorer nil), p's cosines.
func (p *Policy) Thresholds(scorer *pairscore.Thresholds) (dup, amb float64) {
	if scorer == nil {
		return p.DuplicateThreshold, p.AmbiguousThreshold
	}
	dup, amb = scorer.Duplicate, scorer.Ambiguous
	if p.DuplicateProbability > 0 {
		dup = p.DuplicateProbability
	}
	if p.AmbiguousProbability > 0 {
		amb = p.AmbiguousProbability
	}
	return dup, min(amb, dup)
}

// Validate reports what is wrong with p, naming the field.
func (p Policy) Validate() error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("name: empty"))
	}
	for _, g := range p.Tools {
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("tools: bad glob %q", g))
		}
	}
	if p.DuplicateThreshold <= 0 || p.DuplicateThreshold > 1 {
		errs = append(errs, fmt.Errorf("duplicate_threshold: %v not in (0, 1]", p.DuplicateThreshold))
	}
	if p.AmbiguousThreshold <= 0 || p.AmbiguousThreshold > p.DuplicateThreshold {
		errs = append(errs, fmt.Errorf("ambiguous_threshold: %v not in (0, duplicate_threshold]", p.AmbiguousThreshold))
	}
	switch p.OnDuplicate {
	case ActionReplay, ActionConfirm, ActionWarn:
	default:
		errs = append(errs, fmt.Errorf("on_duplicate: %q is not replay, confirm or warn", p.OnDuplicate))
	}
	switch p.OnKeyMismatch {
	case "", ActionConfirm, ActionReplay:
	default:
		errs = append(errs, fmt.Errorf("on_key_mismatch: %q is not confirm or replay", p.OnKeyMismatch))
	}
	switch p.Fallback {
	case FallbackExecute, FallbackConfirm:
	default:
		errs = append(errs, fmt.Errorf("fallback: %q is not execute or confirm", p.Fallback))
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"duplicate_probability", p.DuplicateProbability}, {"ambiguous_probability", p.AmbiguousProbability}, {"semantic_replay", p.SemanticReplay}} {
		if v.v < 0 || v.v > 1 {
			errs = append(errs, fmt.Errorf("%s: %v not in [0, 1]", v.name, v.v))
		}
	}
	if p.DuplicateProbability > 0 && p.AmbiguousProbability > p.DuplicateProbability {
		errs = append(errs, fmt.Errorf("ambiguous_probability: %v above duplicate_probability", p.AmbiguousProbability))
	}
	switch p.Scope {
	case "", ScopeSession, ScopeWorkflow, ScopeTenant:
	default:
		errs = append(errs, fmt.Errorf("scope: %q is not session, workflow or tenant", p.Scope))
	}
	switch p.Identity {
	case "", IdentityGraded, IdentityStrict, IdentityLenient:
	default:
		errs = append(errs, fmt.Errorf("identity: %q is not graded, strict or lenient", p.Identity))
	}
	switch p.Uncompared {
	case "", FallbackExecute, FallbackConfirm:
	default:
		errs = append(errs, fmt.Errorf("uncompared: %q is not execute or confirm", p.Uncompared))
	}
	if p.Lease < 0 {
		errs = append(errs, errors.New("lease: negative"))
	}
	if p.Window < 0 {
		errs = append(errs, errors.New("window: negative"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("policy %q: %w", p.Name, errors.Join(errs...))
	}
	return nil
}

// ToolInfo is what the funnel knows of a tool beyond its name: its MCP
// annotations, for matching policies, and its argument schema, for the
// judge.
type ToolInfo struct {
	ReadOnly, Destructive, Idempotent *bool
	Schema                            json.RawMessage
}

// uncompared is the policy's Uncompared fallback, its default filled in.
func (p *Policy) uncompared() Fallback {
	switch {
	case p.Uncompared != "":
		return p.Uncompared
	case p.ReadOnly != nil && *p.ReadOnly:
		return FallbackExecute
	}
	return FallbackConfirm
}

func (p *Policy) matches(tool string, info ToolInfo) bool {
	if len(p.Tools) == 0 && p.ReadOnly == nil && p.Destructive == nil && p.Idempotent == nil {
		return true // a catch-all
	}
	if len(p.Tools) > 0 {
		hit := false
		for _, g := range p.Tools {
			if ok, _ := path.Match(g, tool); ok {
				hit = true
				break
			}
		}
		if !hit {
			return false
		}
	}
	return hintMatches(p.ReadOnly, info.ReadOnly) &&
		hintMatches(p.Destructive, info.Destructive) &&
		hintMatches(p.Idempotent, info.Idempotent)
}

// hintMatches: an unset want matches anything; a set one needs the tool to
// carry the same hint.
func hintMatches(want, have *bool) bool {
	return want == nil || (have != nil && *have == *want)
}
