package ann

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// proseKeys are the JSON keys whose string values are prose in the public
// tool-calling and dialogue sets: user turns, system turns, instructions,
// queries and descriptions.
var proseKeys = map[string]bool{
	"content": true, "description": true, "instruction": true, "query": true,
	"text": true, "system_utterance": true, "user_utterances_since_last_call": true,
	"utterance": true, "Instructions": true, "final_answer": true, "Function_Description": true,
}

var sentenceEnd = regexp.MustCompile(`([.!?])\s+`)

// Texts collects distinct prose texts from the public data sets under dir
// (JSON, JSON-lines and .snap files: the values of proseKeys; STS-B's TSV
// files: both sentences). Whitespace is collapsed; a text needs at least
// three words, a letter and at most 1,000 bytes; a text of several
// sentences also contributes each sentence. The result is shuffled with
// seed, so a prefix mixes every source; the same files and seed give the
// same list.
func Texts(dir string, seed uint64) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add1 := func(t string) {
		if len(t) > 1000 || len(strings.Fields(t)) < 3 || !strings.ContainsFunc(t, unicode.IsLetter) || seen[t] {
			return
		}
		seen[t] = true
		out = append(out, t)
	}
	add := func(t string) {
		t = strings.Join(strings.Fields(t), " ")
		add1(t)
		parts := strings.Split(sentenceEnd.ReplaceAllString(t, "$1\n"), "\n")
		if len(parts) > 1 {
			for _, p := range parts {
				add1(p)
			}
		}
	}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("texts from %s: %w", dir, err)
	}
	slices.Sort(paths)
	for _, p := range paths {
		var err error
		switch ext := filepath.Ext(p); {
		case ext == ".csv" && strings.Contains(p, "sts"):
			err = tsvSentences(p, add)
		case ext == ".json" || ext == ".jsonl" || ext == ".snap":
			err = jsonProse(p, add)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("texts from %s: no prose found", dir)
	}
	r := rand.New(rand.NewPCG(seed, 0x616e6e))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out, nil
}

// ReadTexts reads one text per line of path, collapsing whitespace and
// dropping blank lines and repeats, in file order.
func ReadTexts(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		t := strings.Join(strings.Fields(sc.Text()), " ")
		if t != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("read %s: no text", path)
	}
	return out, nil
}

// tsvSentences adds columns 6 and 7 (sentence1, sentence2) of an STS-B file.
func tsvSentences(path string, add func(string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if cols := strings.Split(sc.Text(), "\t"); len(cols) >= 7 {
			add(cols[5])
			add(cols[6])
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// jsonProse adds the prose values of a JSON document, or of every line of
// a JSON-lines file. A file that is neither is skipped.
func jsonProse(path string, add func(string)) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc any
	if json.Unmarshal(data, &doc) == nil {
		walkProse(doc, "", add)
		return nil
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if json.Unmarshal([]byte(line), &doc) != nil {
			return nil
		}
		walkProse(doc, "", add)
	}
	return nil
}

func walkProse(v any, key string, add func(string)) {
	switch v := v.(type) {
	case string:
		if proseKeys[key] {
			add(v)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys) // map order must not change the list
		for _, k := range keys {
			walkProse(v[k], k, add)
		}
	case []any:
		for _, x := range v {
			walkProse(x, key, add)
		}
	}
}
