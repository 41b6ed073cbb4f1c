package bench

import (
	"fmt"
	"github.com/idem-dev/idem/internal/publicdata"
	"os"
	"path/filepath"
	"testing"

	"github.com/idem-dev/idem/canon"
)

// The measurement of graded identity on replay traffic, as the funnel
// will see it: every event is graded against every earlier event of its
// session with the same tool and another idempotency key, and flagged
// when its best grade is Restated or Equal. This is the gate alone: the
// funnel may still let a flagged call through on its text fields, never
// the other way round. An earlier call that failed is no candidate (a
// retry after a failure runs again), nor is one with the same key (the
// ledger answers those).
// gradeCounts are the counts the acceptance of issue 18 names.
type gradeCounts struct {
	restated, restatedFlagged, restatedEqual int // tag surface-value (SGD), alternative-value (BFCL); duplicates elsewhere
	corrected, correctedFlagged              int // tag corrected
	hard, hardFlagged                        int // tag hard-negative
	execute, executeFlagged                  int // every event expected to execute
	semantic                                 int // expected to execute, identity passes, text differs: left to the semantic stage
	byRule                                   map[string]int
	// flaggedNegatives lists the corrections and hard negatives flagged,
	// with the readings that flagged them (argument values: test data).
	flaggedNegatives []string
	missed           []int // lines of the restatements not caught
}

func (g gradeCounts) String() string {
	return fmt.Sprintf("restated caught %s (equal %d), corrections flagged %s, hard negatives flagged %s, executes flagged %s (and %d left to the semantic stage: text differs)",
		share(g.restatedFlagged, g.restated), g.restatedEqual, share(g.correctedFlagged, g.corrected),
		share(g.hardFlagged, g.hard), share(g.executeFlagged, g.execute), g.semantic)
}

func share(n, d int) string {
	if d == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d = %.3f", n, d, float64(n)/float64(d))
}

type seen struct {
	key    string
	hash   uint64
	text   string
	failed bool // the earlier call failed: no candidate (a retry after a failure runs again)
	id     *canon.IdentityLeaves
}

// gradeTraffic grades set under cfg (the set's tool schemas added, as
// idem bench run does).
func gradeTraffic(t testing.TB, set *Set, cfg canon.Config) gradeCounts {
	t.Helper()
	cfg.Tools, _ = ToolConfig(set.Tools)
	c, err := canon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := gradeCounts{byRule: map[string]int{}}
	bySession := map[string][]seen{}
	for i := range set.Events {
		e := &set.Events[i]
		call, err := c.CanonicalizeOn(e.Tool, e.Arguments, e.Today)
		if err != nil {
			t.Fatalf("line %d: %v", e.Line, err)
		}
		id := call.IdentityLeaves()
		key := e.Key
		if key == "" {
			key = e.Workflow + ":" + e.Step + ":" + e.Tool
		}
		best := canon.Different
		var bestCmp canon.Comparison
		bestText := false // the best candidate's text view differs: the semantic stage decides
		scope := e.Tenant + "\x00" + e.Session
		for _, p := range bySession[scope] {
			if p.key == key || p.failed || p.id.Tool() != e.Tool {
				continue
			}
			g := canon.Different
			var cmp canon.Comparison
			if p.hash == call.Hash {
				g = canon.Equal
			} else if p.id.ShapeDigest() == id.ShapeDigest() {
				cmp = id.Compare(p.id, e.Today)
				g = cmp.Overall
			}
			if g > best || g == best && bestText && p.text == call.TextView() {
				best, bestCmp, bestText = g, cmp, p.text != call.TextView()
			}
		}
		bySession[scope] = append(bySession[scope], seen{key, call.Hash, call.TextView(), e.Outcome != nil && e.Outcome.Status == "failure", id})
		if e.Truth == nil {
			continue
		}
		flagged := best >= canon.Restated
		if flagged && bestText && e.Truth.Expect == "execute" {
			// Identity passes, the text fields differ: the semantic
			// stage decides, as before graded identity.
			out.semantic++
			flagged = false
		}
		if best == canon.Restated {
			for _, l := range bestCmp.Leaves {
				if l.Grade == canon.Restated {
					out.byRule[l.Rule]++
				}
			}
		}
		switch {
		case e.Truth.Expect == "duplicate" && e.Attempt.Kind != "transient":
			out.restated++
			if flagged {
				out.restatedFlagged++
			}
			if best == canon.Equal {
				out.restatedEqual++
			}
			if !flagged {
				out.missed = append(out.missed, e.Line)
			}
		case e.Truth.Expect == "execute":
			out.execute++
			if flagged {
				out.executeFlagged++
			}
			if e.HasTag("corrected") {
				out.corrected++
				if flagged {
					out.correctedFlagged++
				}
			}
			if e.HasTag("hard-negative") {
				out.hard++
				if flagged {
					out.hardFlagged++
				}
			}
			if flagged && (e.HasTag("hard-negative") || e.HasTag("corrected")) {
				line := fmt.Sprintf("line %d %s %s:", e.Line, e.Tool, best)
				for _, l := range bestCmp.Leaves {
					if l.Grade != canon.Equal || l.Reading != "" {
						line += " " + l.Path + " " + l.Grade.String() + " " + l.Reading + ";"
					}
				}
				out.flaggedNegatives = append(out.flaggedNegatives, line)
			}
		}
	}
	return out
}

func readSet(t testing.TB, dir string) *Set {
	t.Helper()
	set, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// importSGDSplit builds a split's traffic as the acceptance does: idem bench
// import --limit 20000 sgd ….
func importSGDSplit(t testing.TB, split string) *Set {
	t.Helper()
	src := publicdata.Path(t, "upstream", "sgd", "derived", "sgd_transactional_calls_"+split+".jsonl")
	out := filepath.Join(t.TempDir(), "sgd-"+split)
	if _, err := sgdImporter.Import(ImportConfig{Src: src, Out: out, Limit: 20000}); err != nil {
		t.Fatal(err)
	}
	return readSet(t, out)
}

func readingsOnly(names ...string) []string {
	on := map[string]bool{}
	for _, n := range names {
		on[n] = true
	}
	var off []string
	for _, n := range canon.Readings() {
		if !on[n] {
			off = append(off, n)
		}
	}
	return off
}

// TestGradedTraffic measures the default config (no typed block, each
// event's reference_time) on SGD train and dev traffic as the acceptance
// builds it, on the committed BFCL and tau-bench sets, and what each
// reading adds on its own. Run with -v for the table.
func TestGradedTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("imports and grades 25,000 SGD events")
	}
	type setCase struct {
		name string
		set  func(t testing.TB) *Set
		// floors: what the gate reaches
		minRecall                  float64
		maxCorrections, maxHardNeg float64
	}
	sets := []setCase{
		// The floors reached (issue 18 asks ≥ 0.85 and ≤ 0.02 on SGD,
		// ≥ 0.5 and no hard negative on BFCL).
		{"sgd-train", func(t testing.TB) *Set { return importSGDSplit(t, "train") }, 0.99, 0.005, 0.005},
		{"sgd-dev", func(t testing.TB) *Set { return importSGDSplit(t, "dev") }, 0.99, 0.005, 0.005},
		{"bfcl", func(t testing.TB) *Set { return readSet(t, "../testdata/traffic/bfcl") }, 0.68, 0, 0},
		{"tau-retail", func(t testing.TB) *Set { return readSet(t, "../testdata/traffic/tau-retail") }, 1, 0, 0},
		{"tau-airline", func(t testing.TB) *Set { return readSet(t, "../testdata/traffic/tau-airline") }, 1, 0, 0},
	}
	for _, sc := range sets {
		t.Run(sc.name, func(t *testing.T) {
			set := sc.set(t)
			strict := canon.DefaultConfig()
			strict.Typed.ReadingsOff = []string{"all"}
			base := gradeTraffic(t, set, strict)
			all := gradeTraffic(t, set, canon.DefaultConfig())
			t.Logf("%-22s %v", "no readings (today)", base)
			t.Logf("%-22s %v", "all readings (default)", all)
			t.Logf("  restated leaves by reading: %v", all.byRule)
			if os.Getenv("IDEM_GRADE_LIST") != "" {
				t.Logf("  missed lines: %v", all.missed)
			}
			for _, l := range all.flaggedNegatives {
				t.Logf("  flagged: %s", l)
			}
			// What each reading adds: a report, asserted nothing, so only
			// with -v (it grades the set twice per reading).
			for _, r := range verboseOnly(canon.Readings()) {
				cfg := canon.DefaultConfig()
				cfg.Typed.ReadingsOff = readingsOnly(r)
				only := gradeTraffic(t, set, cfg)
				cfg.Typed.ReadingsOff = []string{r}
				but := gradeTraffic(t, set, cfg)
				t.Logf("  %-13s alone: +%d restated caught, +%d corrections, +%d hard negatives flagged; without it: %d restated caught, %d corrections, %d hard negatives flagged",
					r, only.restatedFlagged-base.restatedFlagged, only.correctedFlagged-base.correctedFlagged, only.hardFlagged-base.hardFlagged,
					but.restatedFlagged, but.correctedFlagged, but.hardFlagged)
			}
			if all.restated > 0 && float64(all.restatedFlagged) < sc.minRecall*float64(all.restated) {
				t.Errorf("restated caught %s, want ≥ %.2f", share(all.restatedFlagged, all.restated), sc.minRecall)
			}
			if float64(all.correctedFlagged) > sc.maxCorrections*float64(all.corrected) {
				t.Errorf("corrections flagged %s, want ≤ %.2f", share(all.correctedFlagged, all.corrected), sc.maxCorrections)
			}
			if float64(all.hardFlagged) > sc.maxHardNeg*float64(all.hard) {
				t.Errorf("hard negatives flagged %s, want ≤ %.3f", share(all.hardFlagged, all.hard), sc.maxHardNeg)
			}
		})
	}
}

// verboseOnly returns names under -v, nothing otherwise.
func verboseOnly(names []string) []string {
	if !testing.Verbose() {
		return nil
	}
	return names
}
