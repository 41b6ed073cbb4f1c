package bench

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const chatRules = `- Unlabelled: every tool call an assistant message made (OpenAI ` + "`tool_calls[].function`" + `, or the
  older ` + "`function_call`" + `) is one event with no truth, in the session of its conversation (workflow =
  conversation, step = the tool call's id, or message and call index). ` + "`bench run`" + ` reports hit
  rates per stage for it and writes the borderline pairs to review.jsonl for a person to label.
- A call answered by an error message (a tool/function message whose content holds a
  non-empty "error") has outcome failure (transient); every other call success.`

var chatImporter = Importer{
	Name: "openai-chat",
	Summary: "OpenAI-style chat logs, unlabelled (SRC: a .jsonl of {messages} or message arrays, " +
		"or a folder of ToolBench answer .json files)",
	Rules:  chatRules,
	Import: importChat,
}

type chatMessage struct {
	Role      string `json:"role"`
	Content   any    `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	FunctionCall *struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function_call"`
	ToolCallID string `json:"tool_call_id"`
	Name       string `json:"name"`
}

type conversation struct {
	name     string
	messages []chatMessage
	tools    []json.RawMessage
}

// chatFailed reports whether a tool's answer says it failed.
func chatFailed(content any) bool {
	s, ok := content.(string)
	if !ok {
		return false
	}
	var v struct {
		Error any `json:"error"`
	}
	if json.Unmarshal([]byte(s), &v) != nil {
		return false
	}
	switch e := v.Error.(type) {
	case string:
		return strings.TrimSpace(e) != ""
	case nil:
		return false
	}
	return true
}

func readConversations(src string) ([]conversation, error) {
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrImport, err)
	}
	var convs []conversation
	if !st.IsDir() {
		n := 0
		err := readJSONL(src, func(line []byte) error {
			n++
			c := conversation{name: fmt.Sprintf("%s-%d", strings.TrimSuffix(filepath.Base(src), filepath.Ext(src)), n)}
			if line[0] == '[' {
				return json.Unmarshal(line, &c.messages)
			}
			var v struct {
				ID       string            `json:"id"`
				Messages []chatMessage     `json:"messages"`
				Tools    []json.RawMessage `json:"tools"`
			}
			if err := json.Unmarshal(line, &v); err != nil {
				return err
			}
			if v.ID != "" {
				c.name = v.ID
			}
			c.messages, c.tools = v.Messages, v.Tools
			convs = append(convs, c)
			return nil
		})
		return convs, err
	}
	var files []string
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrImport, err)
	}
	sort.Strings(files)
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrImport, err)
		}
		var v struct {
			AnswerGeneration struct {
				Function      []json.RawMessage `json:"function"`
				TrainMessages [][]chatMessage   `json:"train_messages"`
			} `json:"answer_generation"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			continue // not a ToolBench answer file
		}
		tm := v.AnswerGeneration.TrainMessages
		if len(tm) == 0 {
			continue
		}
		rel, _ := filepath.Rel(src, p)
		name := strings.NewReplacer("/", "-", ".json", "").Replace(rel)
		convs = append(convs, conversation{name: name, messages: tm[len(tm)-1], tools: v.AnswerGeneration.Function})
	}
	return convs, nil
}

func importChat(cfg ImportConfig) (ImportStats, error) {
	convs, err := readConversations(cfg.Src)
	if err != nil {
		return ImportStats{}, err
	}
	if cfg.Limit > 0 && len(convs) > cfg.Limit {
		convs = convs[:cfg.Limit]
	}
	var b builder
	defined := map[string]bool{}
	for _, cv := range convs {
		for _, t := range cv.tools {
			var d struct {
				Name     string `json:"name"`
				Function *struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if json.Unmarshal(t, &d) != nil {
				continue
			}
			if d.Function != nil {
				d.Name = d.Function.Name
			}
			if d.Name == "" || defined[d.Name] {
				continue
			}
			defined[d.Name] = true
			b.tools = append(b.tools, t)
		}
		session := strings.ReplaceAll(cv.name, ":", "-")
		for i, m := range cv.messages {
			if m.Role != "assistant" {
				continue
			}
			type call struct {
				id, name string
				args     json.RawMessage
			}
			var calls []call
			for j, tc := range m.ToolCalls {
				id := tc.ID
				if id == "" {
					id = fmt.Sprintf("m%d-%d", i, j)
				}
				calls = append(calls, call{id, tc.Function.Name, tc.Function.Arguments})
			}
			if m.FunctionCall != nil {
				calls = append(calls, call{fmt.Sprintf("m%d", i), m.FunctionCall.Name, m.FunctionCall.Arguments})
			}
			for _, c := range calls {
				if c.name == "" || len(c.args) == 0 || checkArguments(c.args) != "" {
					continue
				}
				o := &Outcome{Status: "success", Result: json.RawMessage(`{}`), AfterMS: 200}
				if r := answer(cv.messages[i+1:], c.id, c.name); r != nil && chatFailed(r.Content) {
					o = &Outcome{Status: "failure", Error: json.RawMessage(`{"error":"tool error"}`), Transient: true, AfterMS: 200}
				}
				b.add(Event{Session: session, Workflow: session, Step: strings.ReplaceAll(c.id, ":", "-"), Tool: c.name,
					Arguments: c.args, Outcome: o, Tags: []string{"unlabelled"}}, 1000)
			}
		}
	}
	readme := fmt.Sprintf(`# Chat log tool calls (imported from %s)

Unlabelled traffic. Where the source is ToolBench (OpenBMB/ToolBench @ d56fdd89faf8c91fa135090b212bb9057ee5cfc2,
`+"`data_example/answer/`"+`, as copied to `+"`../shared/data/upstream/toolbench/`"+`): Apache-2.0; the
final chain of each trajectory (`+"`train_messages`"+`) is used, and the function definitions go to tools.json.

Rebuild: `+"`idem bench import openai-chat ../shared/data/upstream/toolbench/answer testdata/traffic/toolbench-chat`"+`

## Label rules

%s
`, filepath.Base(cfg.Src), chatRules)
	return b.write(cfg, readme)
}

// answer finds the tool message answering call id (or, for the older
// function_call form, the function message of that name), before the
// assistant's next call.
func answer(after []chatMessage, id, name string) *chatMessage {
	for i := range after {
		m := &after[i]
		switch {
		case m.Role == "tool" && m.ToolCallID == id:
			return m
		case m.Role == "function" && m.Name == name:
			return m
		case m.Role == "assistant" && (len(m.ToolCalls) > 0 || m.FunctionCall != nil):
			return nil
		}
	}
	return nil
}
