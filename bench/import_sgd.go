package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

const sgdRules = `- Every record (a transactional service call the SGD system executed) is one event,
  ` + "`execute`" + `, in the session of its dialogue (workflow = dialogue id, step = turn index), tool
  ` + "`<service>.<method>`" + `, arguments = the canonical slot values as executed, outcome = the
  annotated NOTIFY_SUCCESS/NOTIFY_FAILURE (a failure is permanent). A call of a tool already
  called in the dialogue with other arguments is a distinct effect by the annotation: tag
  ` + "`hard-negative`" + ` (with ` + "`retry-after-failure`" + ` when the earlier call failed).
- Corrections: when the user corrected a value between the system's first and last CONFIRM
  before the call (a slot whose surface value differs between the two, and the first is not
  the executed value), a call with the first confirm's value for the corrected slots is
  placed before the real call (` + "`execute`" + `, tag ` + "`pre-correction`" + `), and the real call is a hard
  negative to it (tag ` + "`corrected`" + `).
- Surface values: after a successful call whose last CONFIRM showed a slot in a surface form
  different from the executed canonical value ("11:30 am" for "11:30", "today" for
  "2019-03-01"), a re-planned repeat with that slot in the confirmed surface form is the
  same call by the annotation: ` + "`duplicate`" + `, tag ` + "`surface-value`" + ` (for one call in two, by hash).
- Transient retries: for one successful call in four (by hash) the same call is retried
  with the same step while it is still running: ` + "`duplicate`" + `, tag ` + "`transient-retry`" + `.
- Every event is tagged ` + "`write`" + ` (all are transactional intents).
- Every event carries ` + "`reference_time`" + ` 2019-03-01, the day the dialogues are set on: every relative date
  the system confirms ("today", "next Monday", "Tuesday next week") names the date it would on Friday
  2019-03-01 (2,388 of 2,388 in train and dev), as an agent that sends its own date would have it.`

// sgdReferenceDate is the day SGD's dialogues are set on (see sgdRules).
const sgdReferenceDate = "2019-03-01"

var sgdImporter = Importer{
	Name:    "sgd",
	Summary: "SGD transactional calls (SRC: sgd/derived/sgd_transactional_calls_<split>.jsonl)",
	Rules:   sgdRules,
	Import:  importSGD,
}

type sgdRecord struct {
	Split      string            `json:"split"`
	Dialogue   string            `json:"dialogue_id"`
	Turn       int               `json:"turn_index"`
	Service    string            `json:"service"`
	Method     string            `json:"method"`
	Parameters map[string]string `json:"parameters"`
	Outcome    string            `json:"outcome"`
	Confirms   []struct {
		Values map[string][]string `json:"values"`
	} `json:"confirms_since_last_call"`
}

type sgdSchema []struct {
	Service string `json:"service_name"`
	Slots   []struct {
		Name           string   `json:"name"`
		Description    string   `json:"description"`
		IsCategorical  bool     `json:"is_categorical"`
		PossibleValues []string `json:"possible_values"`
	} `json:"slots"`
	Intents []struct {
		Name          string            `json:"name"`
		Description   string            `json:"description"`
		Transactional bool              `json:"is_transactional"`
		Required      []string          `json:"required_slots"`
		Optional      map[string]string `json:"optional_slots"`
	} `json:"intents"`
}

// sgdTools builds function definitions from the split's schema.json:
// every slot a string, categorical slots with their possible values as
// an enum.
func sgdTools(path string, used map[string]bool) ([]json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s sgdSchema
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for _, svc := range s {
		slots := map[string]map[string]any{}
		for _, sl := range svc.Slots {
			p := map[string]any{"type": "string", "description": sl.Description}
			if sl.IsCategorical && len(sl.PossibleValues) > 0 {
				p["enum"] = sl.PossibleValues
			}
			slots[sl.Name] = p
		}
		for _, in := range svc.Intents {
			name := svc.Service + "." + in.Name
			if !used[name] {
				continue
			}
			props := map[string]any{}
			for _, n := range in.Required {
				props[n] = slots[n]
			}
			for n := range in.Optional {
				props[n] = slots[n]
			}
			req := in.Required
			if req == nil {
				req = []string{}
			}
			out = append(out, mustJSON(map[string]any{
				"name": name, "description": in.Description,
				"parameters": map[string]any{"type": "object", "properties": props, "required": req},
			}))
		}
	}
	return out, nil
}

func importSGD(cfg ImportConfig) (ImportStats, error) {
	limit := cfg.Limit
	if limit == 0 {
		limit = 450
	}
	var recs []sgdRecord
	err := readJSONL(cfg.Src, func(line []byte) error {
		var r sgdRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return ImportStats{}, err
	}
	// Whole dialogues, in file order, up to the limit.
	var order []string
	byDialogue := map[string][]sgdRecord{}
	n := 0
	for _, r := range recs {
		if _, ok := byDialogue[r.Dialogue]; !ok {
			if n >= limit {
				continue
			}
			order = append(order, r.Dialogue)
		}
		byDialogue[r.Dialogue] = append(byDialogue[r.Dialogue], r)
		n++
	}
	var b builder
	used := map[string]bool{}
	type prev struct {
		args   string
		failed bool
	}
	for _, d := range order {
		calls := map[string][]prev{}
		for _, r := range byDialogue[d] {
			tool := r.Service + "." + r.Method
			used[tool] = true
			step := strconv.Itoa(r.Turn)
			base := Event{Session: "sgd-" + d, Workflow: "sgd-" + d, Tool: tool, ReferenceTime: sgdReferenceDate}
			// Corrections.
			corrected := map[string]string{}
			if len(r.Confirms) >= 2 {
				first, last := r.Confirms[0].Values, r.Confirms[len(r.Confirms)-1].Values
				for s, v := range first {
					lv, ok := last[s]
					pv, inCall := r.Parameters[s]
					if !ok || !inCall || len(v) != 1 || len(lv) != 1 {
						continue
					}
					if !strings.EqualFold(v[0], lv[0]) && !strings.EqualFold(v[0], pv) {
						corrected[s] = v[0]
					}
				}
			}
			if len(corrected) > 0 {
				args := copyParams(r.Parameters)
				for s, v := range corrected {
					args[s] = v
				}
				e := base
				e.Step = step + "-pre"
				e.Arguments = mustJSON(args)
				e.Outcome = &Outcome{Status: "success", Result: json.RawMessage(`{}`), AfterMS: 500}
				e.Truth = &Truth{Intent: fmt.Sprintf("sgd/%s/%s/pre", d, step), Expect: "execute"}
				e.Tags = []string{"write", "pre-correction"}
				b.add(e, 1000)
				calls[tool] = append(calls[tool], prev{canonicalJSON(e.Arguments), false})
			}
			e := base
			e.Step = step
			e.Arguments = mustJSON(r.Parameters)
			args := canonicalJSON(e.Arguments)
			intent := fmt.Sprintf("sgd/%s/%s", d, step)
			e.Truth = &Truth{Intent: intent, Expect: "execute"}
			e.Tags = []string{"write"}
			if r.Outcome == "failure" {
				e.Outcome = &Outcome{Status: "failure", Error: json.RawMessage(`{"error":"NOTIFY_FAILURE"}`), AfterMS: 500}
			} else {
				e.Outcome = &Outcome{Status: "success", Result: json.RawMessage(`{"status":"NOTIFY_SUCCESS"}`), AfterMS: 500}
			}
			differs, afterFail := false, false
			for _, p := range calls[tool] {
				if p.args != args {
					differs = true
				}
				afterFail = afterFail || p.failed
			}
			if differs {
				e.Tags = append(e.Tags, "hard-negative")
			}
			if afterFail {
				e.Tags = append(e.Tags, "retry-after-failure")
			}
			if len(corrected) > 0 {
				e.Tags = append(e.Tags, "corrected")
			}
			line := b.add(e, 1000)
			calls[tool] = append(calls[tool], prev{args, r.Outcome == "failure"})
			if r.Outcome == "failure" {
				continue
			}
			key := "sgd/" + d + "/" + step
			if pick(key, 4) {
				t := e
				t.Attempt = Attempt{Kind: "transient", Number: 2}
				t.Truth = &Truth{Intent: intent, Expect: "duplicate", Of: line}
				t.Tags = []string{"write", "transient-retry"}
				b.add(t, 100)
			}
			if len(r.Confirms) > 0 && pick(key+"/surface", 2) {
				last := r.Confirms[len(r.Confirms)-1].Values
				slots := make([]string, 0, len(last))
				for s := range last {
					slots = append(slots, s)
				}
				sort.Strings(slots)
				for _, s := range slots {
					v, pv := last[s], r.Parameters[s]
					if _, inCall := r.Parameters[s]; !inCall || len(v) != 1 || strings.EqualFold(v[0], pv) || corrected[s] != "" {
						continue
					}
					args := copyParams(r.Parameters)
					args[s] = v[0]
					t := e
					t.Step = step + "-surface"
					t.Arguments = mustJSON(args)
					t.Truth = &Truth{Intent: intent, Expect: "duplicate", Of: line}
					t.Tags = []string{"write", "surface-value"}
					b.add(t, 1000)
					break
				}
			}
		}
	}
	var split string
	if len(order) > 0 {
		split = byDialogue[order[0]][0].Split
	}
	schema := filepath.Join(filepath.Dir(cfg.Src), "..", split, "schema.json")
	tools, err := sgdTools(schema, used)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return ImportStats{}, fmt.Errorf("%w: %s: %v", ErrImport, schema, err)
	}
	b.tools = tools
	readme := fmt.Sprintf(`# SGD transactional calls, %s split (imported)

Source: google-research-datasets/dstc8-schema-guided-dialogue @ e852981ae34990f4358979625854259302feaa78,
as the derived records `+"`../shared/data/upstream/sgd/derived/%s`"+` (every service call of a
transactional intent, values copied from the annotations; see SOURCES.md there), the first
dialogues up to %d calls. tools.json is built from the split's schema.json (every slot a
string; categorical slots with their possible values as an enum).
Licence: CC BY-SA 4.0 (the SGD data set); this derived set is shared under the same licence.

Rebuild: `+"`idem bench import sgd ../shared/data/upstream/sgd/derived/%s testdata/traffic/sgd-%s`"+`

## Label rules

%s
`, split, filepath.Base(cfg.Src), limit, filepath.Base(cfg.Src), split, sgdRules)
	return b.write(cfg, readme)
}

func copyParams(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
