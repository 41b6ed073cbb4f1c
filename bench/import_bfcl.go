package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/idem-dev/idem/canon"
)

const bfclRules = `- Alternatives (BFCL_v4_live_simple, BFCL_v4_live_multiple, BFCL_v4_simple_python,
  BFCL_v4_multiple): a question whose single
  ground-truth call lists more than one acceptable non-empty value for an argument gives two
  events in its own session: the call with the first acceptable value of every argument
  (` + "`execute`" + `), then, as a re-planned step, the same call with the first such argument set to its
  second acceptable value: the same intent by the annotation (both are correct answers to the
  one question): ` + "`duplicate`" + `, tag ` + "`alternative-value`" + `.
- Parallel calls (BFCL_v4_parallel, BFCL_v4_live_parallel): the ground-truth calls of one
  question in order, each ` + "`execute`" + `; a call of a function already called in the question with
  other arguments is a distinct effect by the annotation: tag ` + "`hard-negative`" + `.
- An argument whose acceptable values are only "" (may be omitted) is left out. Questions whose
  function schema canon cannot compile, or whose function name another question defines
  differently, are skipped. Schemas' Python type names are mapped to JSON Schema (dict→object,
  float→number, tuple→array, any→no type). BFCL does not say which functions have side
  effects: no read/write tags.`

var bfclImporter = Importer{
	Name:    "bfcl",
	Summary: "BFCL alternative argument values and parallel calls (SRC: bfcl/ with possible_answer/)",
	Rules:   bfclRules,
	Import:  importBFCL,
}

type bfclQuestion struct {
	ID       string            `json:"id"`
	Function []json.RawMessage `json:"function"`
}

type bfclAnswer struct {
	ID          string                                    `json:"id"`
	GroundTruth []map[string]map[string][]json.RawMessage `json:"ground_truth"`
}

// bfclSchema maps BFCL's Python type names to JSON Schema.
func bfclSchema(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = bfclSchema(val)
		}
		if t, ok := x["type"].(string); ok {
			switch t {
			case "dict":
				out["type"] = "object"
			case "float":
				out["type"] = "number"
			case "tuple":
				out["type"] = "array"
			case "string", "integer", "number", "boolean", "array", "object", "null":
			default:
				delete(out, "type")
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = bfclSchema(x[i])
		}
		return out
	}
	return v
}

func importBFCL(cfg ImportConfig) (ImportStats, error) {
	limit := cfg.Limit
	if limit == 0 {
		limit = 250
	}
	var b builder
	defs := map[string]string{} // name → canonical definition
	var tools []json.RawMessage
	// define registers a question's functions; false when one conflicts
	// or does not compile.
	define := func(fns []json.RawMessage) (bool, []json.RawMessage) {
		var add []json.RawMessage
		for _, raw := range fns {
			var f map[string]any
			if err := json.Unmarshal(raw, &f); err != nil {
				return false, nil
			}
			f = bfclSchema(f).(map[string]any)
			def := mustJSON(f)
			name, _ := f["name"].(string)
			if old, ok := defs[name]; ok {
				if old != string(def) {
					return false, nil
				}
				continue
			}
			if _, err := canon.ParseTools(def); err != nil {
				return false, nil
			}
			add = append(add, def)
		}
		return true, add
	}
	commit := func(add []json.RawMessage) {
		for _, d := range add {
			var f struct {
				Name string `json:"name"`
			}
			json.Unmarshal(d, &f)
			if _, ok := defs[f.Name]; !ok {
				defs[f.Name] = string(d)
				tools = append(tools, d)
			}
		}
	}
	load := func(name string) ([]bfclQuestion, map[string]bfclAnswer, error) {
		var qs []bfclQuestion
		err := readJSONL(filepath.Join(cfg.Src, name), func(line []byte) error {
			var q bfclQuestion
			if err := json.Unmarshal(line, &q); err != nil {
				return err
			}
			qs = append(qs, q)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		as := map[string]bfclAnswer{}
		err = readJSONL(filepath.Join(cfg.Src, "possible_answer", name), func(line []byte) error {
			var a bfclAnswer
			d := json.NewDecoder(bytes.NewReader(line))
			d.UseNumber()
			if err := d.Decode(&a); err != nil {
				return err
			}
			as[a.ID] = a
			return nil
		})
		return qs, as, err
	}
	// first returns the call with each argument's first non-empty value.
	first := func(args map[string][]json.RawMessage) (map[string]json.RawMessage, []string) {
		call := map[string]json.RawMessage{}
		var alt []string
		names := make([]string, 0, len(args))
		for a := range args {
			names = append(names, a)
		}
		sort.Strings(names)
		for _, a := range names {
			var nonEmpty []json.RawMessage
			for _, v := range args[a] {
				if string(v) != `""` {
					nonEmpty = append(nonEmpty, v)
				}
			}
			if len(nonEmpty) == 0 {
				continue
			}
			call[a] = nonEmpty[0]
			if len(nonEmpty) > 1 && canonicalJSON(nonEmpty[0]) != canonicalJSON(nonEmpty[1]) {
				alt = append(alt, a)
			}
		}
		return call, alt
	}
	ok := &Outcome{Status: "success", Result: json.RawMessage(`{}`), AfterMS: 200}
	alts := 0
	for _, file := range []string{"BFCL_v4_live_simple.json", "BFCL_v4_live_multiple.json", "BFCL_v4_simple_python.json", "BFCL_v4_multiple.json"} {
		qs, as, err := load(file)
		if err != nil {
			return ImportStats{}, err
		}
		for _, q := range qs {
			if alts >= limit {
				break
			}
			a, found := as[q.ID]
			if !found || len(a.GroundTruth) != 1 {
				continue
			}
			for fn, args := range a.GroundTruth[0] {
				call, alt := first(args)
				if len(alt) == 0 || len(call) == 0 {
					continue
				}
				good, add := define(q.Function)
				if !good {
					continue
				}
				commit(add)
				session := "bfcl-" + q.ID
				intent := "bfcl/" + q.ID
				line := b.add(Event{Session: session, Workflow: session, Step: "1", Tool: fn, Arguments: mustJSON(call),
					Outcome: ok, Truth: &Truth{Intent: intent, Expect: "execute"}, Tags: []string{"bfcl-alternatives"}}, 1000)
				var values []json.RawMessage
				for _, v := range args[alt[0]] {
					if string(v) != `""` {
						values = append(values, v)
					}
				}
				call2 := map[string]json.RawMessage{}
				for k, v := range call {
					call2[k] = v
				}
				call2[alt[0]] = values[1]
				b.add(Event{Session: session, Workflow: session, Step: "2", Tool: fn, Arguments: mustJSON(call2),
					Outcome: ok, Truth: &Truth{Intent: intent, Expect: "duplicate", Of: line},
					Tags: []string{"bfcl-alternatives", "alternative-value"}}, 1000)
				alts++
			}
		}
	}
	par := 0
	for _, file := range []string{"BFCL_v4_parallel.json", "BFCL_v4_live_parallel.json"} {
		qs, as, err := load(file)
		if err != nil {
			return ImportStats{}, err
		}
		for _, q := range qs {
			if par >= limit/2 {
				break
			}
			a, found := as[q.ID]
			if !found || len(a.GroundTruth) < 2 {
				continue
			}
			good, add := define(q.Function)
			if !good {
				continue
			}
			type emitted struct{ fn, args string }
			var evs []Event
			var done []emitted
			skip := false
			for i, gt := range a.GroundTruth {
				for fn, args := range gt {
					call, _ := first(args)
					c := canonicalJSON(mustJSON(call))
					tags := []string{"bfcl-parallel"}
					for _, d := range done {
						if d.fn == fn && d.args == c {
							skip = true // two identical ground-truth calls: no label to give
						} else if d.fn == fn {
							tags = append(tags, "hard-negative")
							break
						}
					}
					done = append(done, emitted{fn, c})
					session := "bfcl-" + q.ID
					evs = append(evs, Event{Session: session, Workflow: session, Step: strconv.Itoa(i + 1), Tool: fn,
						Arguments: mustJSON(call), Outcome: ok,
						Truth: &Truth{Intent: fmt.Sprintf("bfcl/%s/%d", q.ID, i), Expect: "execute"}, Tags: tags})
				}
			}
			if skip {
				continue
			}
			commit(add)
			for _, e := range evs {
				b.add(e, 1000)
			}
			par++
		}
	}
	b.tools = tools
	readme := fmt.Sprintf(`# BFCL alternatives and parallel calls (imported)

Source: ShishirPatil/gorilla @ 6ea57973c7a6097fd7c5915698c54c17c5b1b6c8,
`+"`berkeley-function-call-leaderboard/bfcl_eval/data/`"+` (question files and possible_answer/), as copied
to `+"`../shared/data/upstream/bfcl/`"+`; %d alternative-value questions and %d parallel questions.
Licence: Apache-2.0.

Rebuild: `+"`idem bench import bfcl ../shared/data/upstream/bfcl testdata/traffic/bfcl`"+`

## Label rules

%s
`, alts, par, bfclRules)
	return b.write(cfg, readme)
}
