package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const tauRules = `- Sessions are users: every task of one user_id runs in the session ` + "`<domain>-<user_id>`" + `,
  tasks in file order, workflow ` + "`<domain>-task<index>`" + `, step = the action's index.
- The first task of a user contributes all its ground-truth actions; an action repeated
  verbatim inside one task is dropped (no label can be given to it). Each is ` + "`execute`" + `.
- Later tasks of the same user (tau-bench's "twins") contribute their write actions only.
  A write identical (same tool, equal arguments) to an earlier write of the session repeats
  that effect: ` + "`duplicate`" + ` (truth.of names it), tag ` + "`twin`" + `. A write of a tool
  already written in the session with different arguments is a distinct effect by the
  annotation: ` + "`execute`" + `, tag ` + "`hard-negative`" + `.
- Meaning-preserving repeats of first-task writes, chosen by a hash of the task and action:
  a transient retry (the original times out; the retry keeps the step and arrives 2 s later:
  ` + "`duplicate`" + `, tag ` + "`transient-retry`" + `), and a re-planned repeat (new step id, keys in reverse
  order, arguments sent as a JSON string: ` + "`duplicate`" + `, tags ` + "`replanned`, `key-order`, `string-arguments`" + `).
- Tags ` + "`write`" + ` (book_, cancel_, update_, modify_, exchange_, return_, send_ tools: the ones that
  change the domain's database), ` + "`read`" + ` (get_, find_, list_, search_), ` + "`other`" + ` (calculate,
  think, transfer_to_human_agents). Outcomes: success after 300 ms (tau-bench records no
  per-action results).`

var tauImporter = Importer{
	Name:    "tau",
	Summary: "tau-bench tasks (SRC: tau-bench/<domain> with tasks_test.json and tools.json)",
	Rules:   tauRules,
	Import:  importTau,
}

type tauTask struct {
	UserID  string `json:"user_id"`
	Actions []struct {
		Name   string          `json:"name"`
		Kwargs json.RawMessage `json:"kwargs"`
	} `json:"actions"`
}

func tauKind(tool string) string {
	for _, p := range []string{"book_", "cancel_", "update_", "modify_", "exchange_", "return_", "send_"} {
		if strings.HasPrefix(tool, p) {
			return "write"
		}
	}
	for _, p := range []string{"get_", "find_", "list_", "search_"} {
		if strings.HasPrefix(tool, p) {
			return "read"
		}
	}
	return "other"
}

// canonicalJSON re-encodes a JSON value with sorted keys, for comparing
// arguments.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	return string(mustJSON(v))
}

func importTau(cfg ImportConfig) (ImportStats, error) {
	domain := filepath.Base(filepath.Clean(cfg.Src))
	data, err := os.ReadFile(filepath.Join(cfg.Src, "tasks_test.json"))
	if err != nil {
		return ImportStats{}, fmt.Errorf("%w: %v", ErrImport, err)
	}
	var tasks []tauTask
	if err := json.Unmarshal(data, &tasks); err != nil {
		return ImportStats{}, fmt.Errorf("%w: tasks_test.json: %v", ErrImport, err)
	}
	if cfg.Limit > 0 && cfg.Limit < len(tasks) {
		tasks = tasks[:cfg.Limit]
	}
	var b builder
	tools, err := os.ReadFile(filepath.Join(cfg.Src, "tools.json"))
	if err != nil {
		return ImportStats{}, fmt.Errorf("%w: %v", ErrImport, err)
	}
	var defs []json.RawMessage
	if err := json.Unmarshal(tools, &defs); err != nil {
		return ImportStats{}, fmt.Errorf("%w: tools.json: %v", ErrImport, err)
	}
	b.tools = defs

	var users []string
	byUser := map[string][]int{}
	for i, t := range tasks {
		if _, ok := byUser[t.UserID]; !ok {
			users = append(users, t.UserID)
		}
		byUser[t.UserID] = append(byUser[t.UserID], i)
	}
	type written struct {
		line   int
		intent string
		args   string
	}
	ok := func(after int64) *Outcome {
		return &Outcome{Status: "success", Result: json.RawMessage(`{}`), AfterMS: after}
	}
	for _, u := range users {
		session := domain + "-" + u
		writes := map[string][]written{} // by tool
		for k, ti := range byUser[u] {
			t := tasks[ti]
			wf := fmt.Sprintf("%s-task%d", domain, ti)
			seen := map[string]bool{}
			for j, a := range t.Actions {
				kind := tauKind(a.Name)
				if k > 0 && kind != "write" {
					continue
				}
				args := canonicalJSON(a.Kwargs)
				if seen[a.Name+"\x00"+args] {
					continue
				}
				seen[a.Name+"\x00"+args] = true
				step := strconv.Itoa(j)
				intent := fmt.Sprintf("%s/task%d/a%d", domain, ti, j)
				e := Event{Session: session, Workflow: wf, Step: step, Tool: a.Name, Arguments: a.Kwargs,
					Outcome: ok(300), Truth: &Truth{Intent: intent, Expect: "execute"}, Tags: []string{kind}}
				if kind == "write" {
					for _, w := range writes[a.Name] {
						if w.args == args {
							e.Truth = &Truth{Intent: w.intent, Expect: "duplicate", Of: w.line}
							e.Tags = append(e.Tags, "twin")
							break
						}
					}
					if e.Truth.Expect == "execute" && len(writes[a.Name]) > 0 {
						e.Tags = append(e.Tags, "hard-negative")
						if k > 0 {
							e.Tags = append(e.Tags, "twin")
						}
					}
				}
				key := fmt.Sprintf("%s/%d/%d", domain, ti, j)
				retry := k == 0 && kind == "write" && pick(key, 3)
				if retry {
					e.Outcome = &Outcome{Status: "timeout"}
				}
				line := b.add(e, 1000)
				if kind == "write" && e.Truth.Expect == "execute" {
					writes[a.Name] = append(writes[a.Name], written{line, intent, args})
				}
				if retry {
					r := e
					r.Attempt = Attempt{Kind: "transient", Number: 2}
					r.Outcome = ok(300)
					r.Truth = &Truth{Intent: intent, Expect: "duplicate", Of: line}
					r.Tags = []string{"write", "transient-retry"}
					b.add(r, 2000)
				}
				if k == 0 && kind == "write" && e.Truth.Expect == "execute" && pick(key+"/replan", 3) {
					r := e
					r.Step = step + "-replan"
					r.Arguments = reorderedString(a.Kwargs)
					r.Outcome = ok(300)
					r.Truth = &Truth{Intent: intent, Expect: "duplicate", Of: line}
					r.Tags = []string{"write", "replanned", "key-order", "string-arguments"}
					b.add(r, 1500)
				}
			}
		}
	}
	readme := fmt.Sprintf(`# tau-bench %s (imported)

Source: sierra-research/tau-bench @ 59a200c6d575d595120f1cb70fea53cef0632f6b,
`+"`tau_bench/envs/%s/tasks_test.py`"+` and the tools' `+"`get_info()`"+` schemas, as re-serialised in
`+"`../shared/data/upstream/tau-bench/%s/`"+` (see SOURCES.md there). Licence: MIT (tau-bench);
the tool schemas in tools.json are copied verbatim.

Rebuild: `+"`idem bench import tau ../shared/data/upstream/tau-bench/%s testdata/traffic/tau-%s`"+`

## Label rules

%s
`, domain, domain, domain, domain, domain, tauRules)
	return b.write(cfg, readme)
}
