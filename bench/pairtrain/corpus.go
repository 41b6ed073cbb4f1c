package pairtrain

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// idfDocs gathers the documents the IDF table counts words over: the
// free text of the public sets the project has (STS-B train sentences,
// SGD users' and system's utterances of the train split and the SGD-X
// descriptions, BFCL users' questions, tau-bench instructions, ToolBench
// queries, API-Bank dialogue turns, ToolAlpaca instructions and API
// descriptions, GitHub MCP tool descriptions), one document per sentence
// or utterance, distinct, sorted. The
// STS-B dev sentences are not among them: they are the test.
func idfDocs(up string) ([]string, error) {
	seen := map[string]bool{}
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			seen[s] = true
		}
	}
	// STS-B train.
	if err := eachLine(filepath.Join(up, "stsb", "sts-train.csv"), func(line []byte) error {
		cols := strings.Split(string(line), "\t")
		if len(cols) >= 7 {
			add(cols[5])
			add(cols[6])
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// SGD train.
	if err := eachLine(filepath.Join(up, "sgd", "derived", "sgd_transactional_calls_train.jsonl"), func(line []byte) error {
		var r struct {
			System   string   `json:"system_utterance"`
			Users    []string `json:"user_utterances_since_last_call"`
			Confirms []struct {
				Utterance string `json:"utterance"`
			} `json:"confirms_since_last_call"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		add(r.System)
		for _, u := range r.Users {
			add(u)
		}
		for _, c := range r.Confirms {
			add(c.Utterance)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for i := 1; i <= 5; i++ {
		data, err := os.ReadFile(filepath.Join(up, "sgd", "sgd_x", "data", fmt.Sprintf("v%d", i), "test", "schema.json"))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrData, err)
		}
		var s []struct {
			Description string `json:"description"`
			Slots       []struct {
				Description string `json:"description"`
			} `json:"slots"`
			Intents []struct {
				Description string `json:"description"`
			} `json:"intents"`
		}
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("%w: sgd-x v%d: %w", ErrData, i, err)
		}
		for _, sv := range s {
			add(sv.Description)
			for _, x := range sv.Slots {
				add(x.Description)
			}
			for _, x := range sv.Intents {
				add(x.Description)
			}
		}
	}
	// BFCL questions.
	names, err := filepath.Glob(filepath.Join(up, "bfcl", "BFCL_v4_*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	for _, name := range names {
		if err := eachLine(name, func(line []byte) error {
			_, users, err := bfclUsers(line)
			for _, u := range users {
				add(u)
			}
			return err
		}); err != nil {
			return nil, err
		}
	}
	// tau-bench instructions.
	for _, name := range []string{"airline/tasks_test.json", "retail/tasks_test.json", "retail/tasks_train.json", "retail/tasks_dev.json"} {
		var tasks []struct {
			Instruction string `json:"instruction"`
		}
		if err := readJSON(filepath.Join(up, "tau-bench", name), &tasks); err != nil {
			return nil, err
		}
		for _, t := range tasks {
			add(t.Instruction)
		}
	}
	// ToolBench queries.
	names, err = filepath.Glob(filepath.Join(up, "toolbench", "instruction", "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	for _, name := range names {
		var qs []struct {
			Query string `json:"query"`
		}
		if err := readJSON(name, &qs); err != nil {
			return nil, err
		}
		for _, q := range qs {
			add(q.Query)
		}
	}
	// API-Bank dialogues (users' and the assistant's turns).
	names, err = filepath.Glob(filepath.Join(up, "api-bank", "lv1-lv2-samples", "*", "*.jsonl"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	for _, name := range names {
		if err := eachLine(name, func(line []byte) error {
			var t struct {
				Role string `json:"role"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(line, &t); err != nil {
				return err
			}
			if t.Role == "User" || t.Role == "AI" {
				add(t.Text)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	// ToolAlpaca instructions and API descriptions.
	for _, name := range []string{"eval_simulated.json", "eval_real.json"} {
		var apis []struct {
			Description  string   `json:"Description"`
			Instructions []string `json:"Instructions"`
		}
		if err := readJSON(filepath.Join(up, "toolalpaca", name), &apis); err != nil {
			return nil, err
		}
		for _, a := range apis {
			add(a.Description)
			for _, in := range a.Instructions {
				add(in)
			}
		}
	}
	// GitHub MCP server tool descriptions.
	names, err = filepath.Glob(filepath.Join(up, "github-mcp-server", "__toolsnaps__", "*.snap"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	for _, name := range names {
		var t struct {
			Description string `json:"description"`
		}
		if err := readJSON(name, &t); err != nil {
			return nil, err
		}
		add(t.Description)
	}
	docs := make([]string, 0, len(seen))
	for s := range seen {
		docs = append(docs, s)
	}
	slices.Sort(docs)
	return docs, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrData, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrData, path, err)
	}
	return nil
}
