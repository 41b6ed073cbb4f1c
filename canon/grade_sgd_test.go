package canon

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idem-dev/idem/internal/publicdata"
	"io/fs"
	"os"
	"sort"
	"testing"
)

// loadSGDSplit reads one split of the SGD derived records, or skips the
// test when ../shared is not laid out beside the checkout.
func loadSGDSplit(t testing.TB, split string) []sgdRecord {
	t.Helper()
	recs, err := readSGDSplit(t, split)
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// sgdSchemaTools builds the tool configs of a split from its schema.json
// the way idem bench import does (every slot a string, categorical slots
// with their possible values as an enum), so that enum members compare
// as the replayed traffic's do.
func sgdSchemaTools(t testing.TB, split string) map[string]ToolConfig {
	t.Helper()
	data, err := os.ReadFile(publicdata.Path(t, "upstream", "sgd", split, "schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var services []struct {
		Service string `json:"service_name"`
		Slots   []struct {
			Name           string   `json:"name"`
			IsCategorical  bool     `json:"is_categorical"`
			PossibleValues []string `json:"possible_values"`
		} `json:"slots"`
		Intents []struct {
			Name string `json:"name"`
		} `json:"intents"`
	}
	if err := json.Unmarshal(data, &services); err != nil {
		t.Fatal(err)
	}
	tools := map[string]ToolConfig{}
	for _, svc := range services {
		props := map[string]any{}
		for _, sl := range svc.Slots {
			p := map[string]any{"type": "string"}
			if sl.IsCategorical && len(sl.PossibleValues) > 0 {
				p["enum"] = sl.PossibleValues
			}
			props[sl.Name] = p
		}
		schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
		for _, in := range svc.Intents {
			tools[svc.Service+"."+in.Name] = ToolConfig{Schema: schema}
		}
	}
	return tools
}

// slotGrades grades each pair's two calls (the executed call, and the same
// call with one slot spelled as the pair says), said on sgdToday, and
// counts by slot kind the pairs graded Restated or Equal, and by reading
// the Restated ones. Text-class slots are left out (the semantic stage
// compares them).
type slotGrades struct {
	n, flagged, equal map[string]int
	byReading         map[string]int
	examples          []string // flagged pairs, for -v
	missed            []string // pairs graded Different, for -v
}

func gradeSlots(t testing.TB, cfg Config, pairs []sgdPair) slotGrades {
	c := mustNew(t, cfg)
	out := slotGrades{n: map[string]int{}, flagged: map[string]int{}, equal: map[string]int{}, byReading: map[string]int{}}
	for _, p := range pairs {
		x, y := p.calls(t, c, sgdToday)
		if !identitySlot(x, p.slot) && !identitySlot(y, p.slot) {
			continue
		}
		k := slotKind(p.slot)
		cmp := Compare(y, x, sgdToday)
		for _, kind := range []string{"all", k} {
			out.n[kind]++
			if cmp.Overall >= Restated {
				out.flagged[kind]++
			}
			if cmp.Overall == Equal {
				out.equal[kind]++
			}
		}
		if cmp.Overall == Different {
			out.missed = append(out.missed, p.tool+" "+p.slot+": "+q(p.value)+" / "+q(p.params[p.slot]))
		}
		if cmp.Overall == Restated {
			for _, l := range cmp.Leaves {
				if l.Grade == Restated {
					out.byReading[l.Rule]++
					out.examples = append(out.examples, p.tool+" "+p.slot+": "+l.Reading)
				}
			}
		}
	}
	return out
}

func (s slotGrades) line(kind string) string {
	return fmt.Sprintf("%-6s %s (equal %d)", kind, ratio(s.flagged[kind], s.n[kind]), s.equal[kind])
}

func ratio(n, d int) string {
	if d == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d = %.3f", n, d, float64(n)/float64(d))
}

func onlyReading(name string) []string {
	var off []string
	for _, r := range readingNames {
		if r != name {
			off = append(off, r)
		}
	}
	return off
}

// TestSGDGradedSlots measures graded identity on every restated and every
// corrected slot of SGD train and dev, separately, with the default config
// (no typed block) and the reference date 2019-03-01: recall of
// restatements (graded Restated or Equal) and false positives on
// corrections (a value the user changed before execution, which must stay
// Different), overall, by slot kind, and what each reading adds on its
// own. Run with -v for the table and the corrections flagged.
func TestSGDGradedSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 15,176 SGD records")
	}
	for _, split := range []string{"train", "dev"} {
		t.Run(split, func(t *testing.T) {
			restated, corrected := sgdPairs(loadSGDSplit(t, split))
			strict := DefaultConfig()
			strict.Typed.ReadingsOff = []string{"all"}
			base := gradeSlots(t, strict, restated)
			baseFP := gradeSlots(t, strict, corrected)
			rec := gradeSlots(t, DefaultConfig(), restated)
			fp := gradeSlots(t, DefaultConfig(), corrected)
			withSchemas := DefaultConfig()
			withSchemas.Tools = sgdSchemaTools(t, split)
			recS := gradeSlots(t, withSchemas, restated)
			fpS := gradeSlots(t, withSchemas, corrected)
			t.Logf("with the tools' schemas (categorical slots as enums, as idem bench import writes them): restatements caught %s, corrections flagged %s",
				ratio(recS.flagged["all"], recS.n["all"]), ratio(fpS.flagged["all"], fpS.n["all"]))
			for _, e := range fpS.examples {
				t.Logf("  correction flagged with schemas: %s", e)
			}
			t.Logf("restatements caught, no readings / default readings; corrections flagged, the same:")
			for _, k := range []string{"all", "date", "time", "money", "number", "name"} {
				t.Logf("  %s | %s || %s | %s", base.line(k), rec.line(k), baseFP.line(k), fp.line(k))
			}
			t.Logf("  restated leaves by reading: %v; corrections flagged by reading: %v", rec.byReading, fp.byReading)
			// What each reading adds: a report, asserted nothing, so only
			// with -v (it grades the set twice per reading).
			for _, name := range verboseOnly(readingNames) {
				cfg := DefaultConfig()
				cfg.Typed.ReadingsOff = onlyReading(name)
				r := gradeSlots(t, cfg, restated)
				f := gradeSlots(t, cfg, corrected)
				t.Logf("  %-13s alone adds %5d restatements caught, %3d corrections flagged", name,
					r.flagged["all"]-base.flagged["all"], f.flagged["all"]-baseFP.flagged["all"])
			}
			if os.Getenv("IDEM_GRADE_LIST") != "" {
				for _, m := range rec.missed {
					t.Logf("  restatement missed: %s", m)
				}
			}
			sort.Strings(fp.examples)
			for _, e := range fp.examples {
				t.Logf("  correction flagged: %s", e)
			}
			// The floors reached. Without schemas, "Economy" and "Premium
			// Economy" are a subset reading (30 of 3,380 in train); with the
			// enum they are two members.
			if got := float64(rec.flagged["all"]) / float64(rec.n["all"]); got < 0.99 {
				t.Errorf("restatements caught %s, want ≥ 0.99", ratio(rec.flagged["all"], rec.n["all"]))
			}
			if got := float64(fp.flagged["all"]) / float64(fp.n["all"]); got > 0.01 {
				t.Errorf("corrections flagged %s, want ≤ 0.01", ratio(fp.flagged["all"], fp.n["all"]))
			}
			if got := float64(recS.flagged["all"]) / float64(recS.n["all"]); got < 0.99 {
				t.Errorf("with schemas: restatements caught %s, want ≥ 0.99", ratio(recS.flagged["all"], recS.n["all"]))
			}
			if got := float64(fpS.flagged["all"]) / float64(fpS.n["all"]); got > 0.001 {
				t.Errorf("with schemas: corrections flagged %s, want ≤ 0.001", ratio(fpS.flagged["all"], fpS.n["all"]))
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
