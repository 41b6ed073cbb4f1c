package funnel

import (
	"strings"
	"testing"

	"github.com/idem-dev/idem/pairscore"
)

// readPolicies make search_* tools read-only actions under the default
// read-only policy (replay), optionally with a semantic_replay threshold.
func readPolicies(replay float64) []Policy {
	r := DefaultPolicies()[0]
	r.Name, r.ReadOnly, r.Tools, r.SemanticReplay = "reads", nil, []string{"search_*"}, replay
	return []Policy{r, DefaultPolicy()}
}

// TestReadsReplayOnlyCertainMatches: a read's exact repeat replays; a
// reworded read (a match resting on free-text similarity) executes under
// the default policy, saying why, and replays under a calibrated
// semantic_replay.
func TestReadsReplayOnlyCertainMatches(t *testing.T) {
	first := `{"repo":"idem","query":"How do I rotate the API keys of a tenant?"}`
	reworded := `{"repo":"idem","query":"How can I rotate a tenant's API keys?"}`

	e := newEnv(t, options{policies: readPolicies(0)})
	e.run(t, Request{Step: "1", Tool: "search_docs", Arguments: []byte(first)}, `{"hits":["docs/operations.md"]}`)
	want(t, e.check(t, Request{Step: "2", Tool: "search_docs", Arguments: []byte(first)}), Duplicate, StageExact)
	res := e.check(t, Request{Step: "3", Tool: "search_docs", Arguments: []byte(reworded)})
	want(t, res, Execute, StageNew)
	if res.Match == nil || res.Match.Similarity < 0.9 || !strings.Contains(strings.Join(res.Notes, "\n"), "semantic_replay") {
		t.Errorf("match %+v, notes %q: want the near match and why it was not replayed", res.Match, res.Notes)
	}

	cal := newEnv(t, options{policies: readPolicies(0.9)})
	cal.run(t, Request{Step: "1", Tool: "search_docs", Arguments: []byte(first)}, `{"hits":["docs/operations.md"]}`)
	res = cal.check(t, Request{Step: "3", Tool: "search_docs", Arguments: []byte(reworded)})
	want(t, res, Duplicate, StageSemantic)
	if string(res.Match.Result) != `{"hits":["docs/operations.md"]}` {
		t.Errorf("replayed %s", res.Match.Result)
	}
}

// TestPairScorerDecides: with the pair scorer on, text candidates are
// decided by its probability, which the answer reports beside the cosine
// with the words that weighed against the match: a reworded request is
// still asked about, a question about another word is not.
func TestPairScorerDecides(t *testing.T) {
	m, err := pairscore.Default()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, options{scorer: m})
	e.run(t, Request{Step: "1", Tool: "send_message", Arguments: []byte(`{"to":"it@example.com","body":"reset my password"}`)}, `{"ok":true}`)
	res := e.check(t, Request{Step: "2", Tool: "send_message", Arguments: []byte(`{"to":"it@example.com","body":"I need to change my password"}`)})
	want(t, res, Confirm, StageSemantic)
	if res.Match.Probability < m.Thresholds().Duplicate || res.Match.Similarity <= 0 {
		t.Errorf("match %+v: want the probability (≥ %.3f) beside the cosine", res.Match, m.Thresholds().Duplicate)
	}

	e.run(t, Request{Step: "3", Tool: "send_message", Arguments: []byte(`{"to":"it@example.com","body":"How is the word 'anachronism' used in sentences?"}`)}, `{"ok":true}`)
	res = e.check(t, Request{Step: "4", Tool: "send_message", Arguments: []byte(`{"to":"it@example.com","body":"How is the word 'mischievous' used in sentences?"}`)})
	if res.Decision != Execute {
		t.Fatalf("a question about another word: %s (%s)", res.Decision, res.Reason)
	}
	if notes := strings.Join(res.Notes, "\n"); res.Match != nil && !strings.Contains(notes, "differs: anachronism / mischievous") {
		t.Errorf("notes %q: want the words that weighed against the match", notes)
	}
}
