package pairtrain

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/idem-dev/idem/canon"
)

// Split says what a labelled pair is for.
type Split string

// The splits. Train fits the weights; Dev chooses everything else (the
// regularization, the threshold reported); Test is measured once, never
// looked at while choosing.
const (
	Train Split = "train"
	Dev   Split = "dev"
	Test  Split = "test"
)

// Example is one labelled pair of text views.
type Example struct {
	Source string // "stsb", "sgdx-intent", "sgd-confirm", "bfcl"
	ID     string // unique within the source
	Split  Split
	A, B   string // text views, as canon writes them
	Same   bool   // the two ask for the same effect (by the source's labels)
	// Hard marks a negative that shares at least half its content words
	// (the Quora-like slice: a different request in nearly the same words).
	Hard bool
}

// ErrData reports public data that cannot be read as expected.
var ErrData = errors.New("pairtrain: data")

// STS-B cut-offs, those of the committed traffic sets (bench's stsb
// importer): at or above stsbSame the pair says the same thing; at or
// below stsbDifferent it does not. The middle is not used.
const (
	stsbSame      = 4.5
	stsbDifferent = 2.0
)

// devShare is the share of each training source held out as Dev, by the
// hash of a pair's group (so that one function's or one service's pairs
// are all on one side).
const devShare = 0.2

func splitOf(group string) Split {
	if float64(hash32(group))/float64(1<<32) < devShare {
		return Dev
	}
	return Train
}

func hash32(s string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s))
	return h.Sum32()
}

// viewer builds text views the way canon does for a tool whose one field
// is classed text.
type viewer struct {
	cns map[string]*canon.Canonicalizer // by tool and field
}

func newViewer() *viewer { return &viewer{cns: map[string]*canon.Canonicalizer{}} }

// view is the text view of a call of tool with field set to text.
func (v *viewer) view(tool, field, text string) (string, error) {
	cn := v.cns[tool+"\x00"+field]
	if cn == nil {
		cfg := canon.DefaultConfig()
		cfg.Tools = map[string]canon.ToolConfig{tool: {Fields: map[string]canon.FieldRule{field: {Class: canon.Text}}}}
		var err error
		if cn, err = canon.New(cfg); err != nil {
			return "", err
		}
		v.cns[tool+"\x00"+field] = cn
	}
	args, _ := json.Marshal(map[string]string{field: text})
	c, err := cn.Canonicalize(tool, args)
	if err != nil {
		return "", fmt.Errorf("%w: %s.%s: %w", ErrData, tool, field, err)
	}
	return c.TextView(), nil
}

// views is view of two texts.
func (v *viewer) views(tool, field, x, y string) (a, b string, err error) {
	if a, err = v.view(tool, field, x); err != nil {
		return "", "", err
	}
	b, err = v.view(tool, field, y)
	return a, b, err
}

// readSTSB reads an STS-B file as pairs of comment bodies on
// add_issue_comment, as the committed traffic sets post them.
func readSTSB(v *viewer, path string, split func(id string) Split) ([]Example, error) {
	var out []Example
	err := eachLine(path, func(line []byte) error {
		cols := strings.Split(string(line), "\t")
		if len(cols) < 7 {
			return nil // as the importer: short upstream lines are skipped
		}
		score, err := strconv.ParseFloat(cols[4], 64)
		if err != nil {
			return fmt.Errorf("score %q", cols[4])
		}
		s1, s2 := strings.TrimSpace(cols[5]), strings.TrimSpace(cols[6])
		if s1 == "" || s2 == "" || s1 == s2 || score > stsbDifferent && score < stsbSame {
			return nil
		}
		id := cols[1] + "-" + cols[2] + "-" + cols[3]
		a, b, err := v.views("add_issue_comment", "body", s1, s2)
		if err != nil {
			return err
		}
		out = append(out, Example{Source: "stsb", ID: id, Split: split(id), A: a, B: b, Same: score >= stsbSame})
		return nil
	})
	return out, err
}

// sgdxSchema is the part of an SGD-X schema the pairs come from.
type sgdxSchema []struct {
	Service string `json:"service_name"`
	Intents []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"intents"`
}

// readSGDX reads the five crowd paraphrases of the SGD test schemas: the
// description of one intent in two versions asks for the same thing; two
// intents of one service do not. (The slots' descriptions are noun
// phrases, not requests: "Alarm time". They are left out.)
func readSGDX(v *viewer, dir string) ([]Example, error) {
	var vs []sgdxSchema
	for i := 1; i <= 5; i++ {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("v%d", i), "test", "schema.json"))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrData, err)
		}
		var s sgdxSchema
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("%w: sgd-x v%d: %w", ErrData, i, err)
		}
		if len(vs) > 0 && len(s) != len(vs[0]) {
			return nil, fmt.Errorf("%w: sgd-x v%d has %d services, v1 %d", ErrData, i, len(s), len(vs[0]))
		}
		vs = append(vs, s)
	}
	var out []Example
	for si := range vs[0] {
		service := vs[0][si].Service
		group := strings.TrimRight(service, "0123456789") // Alarm_1… : one group per domain
		split := splitOf("sgdx/" + group)
		type item struct {
			kind       string
			idx, ver   int
			desc, tool string
		}
		var items []item
		for ver := range vs {
			s := vs[ver][si]
			if len(s.Intents) != len(vs[0][si].Intents) {
				return nil, fmt.Errorf("%w: sgd-x v%d %s: intents do not align with v1", ErrData, ver+1, s.Service)
			}
			for k, it := range s.Intents {
				items = append(items, item{"intent", k, ver, it.Description, service})
			}
		}
		for i, x := range items {
			for _, y := range items[i+1:] {
				if x.kind != y.kind || x.ver == y.ver && x.idx == y.idx || x.desc == y.desc {
					continue
				}
				same := x.idx == y.idx
				if !same && x.ver != y.ver {
					continue // negatives within one version: the same writer's wording
				}
				a, b, err := v.views(x.tool, "description", x.desc, y.desc)
				if err != nil {
					return nil, err
				}
				id := fmt.Sprintf("%s/%s%d.v%d-%s%d.v%d", service, x.kind, x.idx, x.ver+1, y.kind, y.idx, y.ver+1)
				out = append(out, Example{Source: "sgdx-" + x.kind, ID: id, Split: split, A: a, B: b, Same: same})
			}
		}
	}
	return out, nil
}

// sgdCall is the part of a derived SGD record the confirmation pairs come
// from.
type sgdCall struct {
	Dialogue string `json:"dialogue_id"`
	Turn     int    `json:"turn_index"`
	Service  string `json:"service"`
	Method   string `json:"method"`
	Confirms []struct {
		Utterance string              `json:"utterance"`
		Values    map[string][]string `json:"values"`
	} `json:"confirms_since_last_call"`
}

// maxSGDConfirms bounds the confirmation pairs taken (by hash order).
const maxSGDConfirms = 600

// readSGDConfirms reads the system's confirmations before a call the user
// corrected: the first and the last confirmation name different values,
// so they ask for different effects in nearly the same words.
func readSGDConfirms(v *viewer, path string) ([]Example, error) {
	var out []Example
	err := eachLine(path, func(line []byte) error {
		var c sgdCall
		if err := json.Unmarshal(line, &c); err != nil {
			return err
		}
		if len(c.Confirms) < 2 {
			return nil
		}
		first, last := c.Confirms[0], c.Confirms[len(c.Confirms)-1]
		if first.Utterance == last.Utterance || sameValues(first.Values, last.Values) {
			return nil
		}
		a, b, err := v.views(c.Service+"."+c.Method, "confirmation", first.Utterance, last.Utterance)
		if err != nil {
			return err
		}
		id := fmt.Sprintf("%s/%d", c.Dialogue, c.Turn)
		out = append(out, Example{Source: "sgd-confirm", ID: id, Split: splitOf("sgd/" + strings.TrimRight(c.Service, "0123456789")), A: a, B: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(x, y Example) int { return cmpU32(hash32(x.ID), hash32(y.ID)) })
	return out[:min(len(out), maxSGDConfirms)], nil
}

// sameValues reports whether the values b names agree with a's (a later
// confirmation often repeats only the slots that changed).
func sameValues(a, b map[string][]string) bool {
	for k, vb := range b {
		if va, ok := a[k]; !ok || !slices.Equal(va, vb) {
			return false
		}
	}
	return true
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// bfclFiles are the BFCL question files whose questions have one
// ground-truth call.
var bfclFiles = []string{"BFCL_v4_live_simple", "BFCL_v4_live_multiple", "BFCL_v4_simple_python", "BFCL_v4_multiple"}

// maxBFCLPerFunction bounds the pairs taken per function (by hash order),
// so that a few functions with many questions do not make the set.
const maxBFCLPerFunction = 6

// readBFCL pairs the questions that call the same function: with equal
// ground truth (every acceptable value equal) they ask for the same call;
// with different ground truth, for another call of it.
func readBFCL(v *viewer, dir string) ([]Example, error) {
	type question struct {
		id, fn, text, truth string
	}
	byFn := map[string][]question{}
	for _, name := range bfclFiles {
		truths := map[string]string{}
		err := eachLine(filepath.Join(dir, "possible_answer", name+".json"), func(line []byte) error {
			var a struct {
				ID    string            `json:"id"`
				Truth []json.RawMessage `json:"ground_truth"`
			}
			if err := json.Unmarshal(line, &a); err != nil {
				return err
			}
			if len(a.Truth) == 1 {
				var m map[string]any
				if err := json.Unmarshal(a.Truth[0], &m); err != nil {
					return err
				}
				t, _ := json.Marshal(m) // keys sorted
				truths[a.ID] = string(t)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		err = eachLine(filepath.Join(dir, name+".json"), func(line []byte) error {
			id, users, err := bfclUsers(line)
			if err != nil {
				return err
			}
			truth, ok := truths[id]
			if !ok {
				return nil
			}
			if len(users) != 1 || strings.TrimSpace(users[0]) == "" {
				return nil
			}
			var m map[string]json.RawMessage
			_ = json.Unmarshal([]byte(truth), &m)
			for fn := range m {
				byFn[fn] = append(byFn[fn], question{id: id, fn: fn, text: strings.TrimSpace(users[0]), truth: truth})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	fns := make([]string, 0, len(byFn))
	for fn := range byFn {
		fns = append(fns, fn)
	}
	slices.Sort(fns)
	var out []Example
	for _, fn := range fns {
		qs := byFn[fn]
		var pairs []Example
		for i, x := range qs {
			for _, y := range qs[i+1:] {
				if x.text == y.text {
					continue
				}
				a, b, err := v.views(fn, "request", x.text, y.text)
				if err != nil {
					return nil, err
				}
				pairs = append(pairs, Example{Source: "bfcl", ID: x.id + "~" + y.id, Split: splitOf("bfcl/" + fn), A: a, B: b, Same: x.truth == y.truth})
			}
		}
		slices.SortStableFunc(pairs, func(x, y Example) int { return cmpU32(hash32(x.ID), hash32(y.ID)) })
		// Every positive (there are few), then negatives up to the bound.
		neg := 0
		for _, p := range pairs {
			if p.Same || neg < maxBFCLPerFunction {
				out = append(out, p)
				if !p.Same {
					neg++
				}
			}
		}
	}
	return out, nil
}

// bfclUsers reads a BFCL question record: its id and its users' turns.
func bfclUsers(line []byte) (id string, users []string, err error) {
	var q struct {
		ID       string `json:"id"`
		Question [][]struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"question"`
	}
	if err := json.Unmarshal(line, &q); err != nil {
		return "", nil, err
	}
	for _, turn := range q.Question {
		for _, m := range turn {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
	}
	return q.ID, users, nil
}

func eachLine(path string, fn func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrData, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		if err := fn(sc.Bytes()); err != nil {
			return fmt.Errorf("%w: %s:%d: %w", ErrData, path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrData, path, err)
	}
	return nil
}
