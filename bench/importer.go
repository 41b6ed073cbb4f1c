package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrImport: the source cannot be imported (missing file, unexpected
// shape).
var ErrImport = errors.New("bench: import")

// ImportConfig says what to import and where.
type ImportConfig struct {
	// Src is the source file or folder (see each importer).
	Src string
	// Out is the traffic set folder to write.
	Out string
	// Limit bounds the source records used; 0 means the importer's
	// default, which keeps the set small enough for CI.
	Limit int
}

// ImportStats describes the set written.
type ImportStats struct {
	Events, Duplicates, HardNegatives, Unlabelled, Sessions int
}

// Importer turns one public format into a traffic set. Importers never
// invent labels: a duplicate is the same intent by the upstream
// annotation or by a transformation that cannot change meaning (key
// order, white space, number spelling, arguments as a string, a transient
// retry of the same call); a hard negative differs by the upstream
// annotation. Each importer's Rules say exactly how.
type Importer struct {
	Name    string
	Summary string
	// Rules are the label rules, copied into the set's README.
	Rules  string
	Import func(cfg ImportConfig) (ImportStats, error)
}

// Importers lists the importers.
func Importers() []Importer {
	return []Importer{tauImporter, sgdImporter, bfclImporter, stsbImporter, chatImporter}
}

// LookupImporter finds an importer by name.
func LookupImporter(name string) (Importer, bool) {
	for _, im := range Importers() {
		if im.Name == name {
			return im, true
		}
	}
	return Importer{}, false
}

// builder accumulates a traffic set.
type builder struct {
	events []Event
	t      int64
	tools  []json.RawMessage
}

// add appends e at the next arrival time, gap ms after the previous
// event, and returns its line number.
func (b *builder) add(e Event, gap int64) int {
	b.t += gap
	e.TMS = b.t
	if e.Attempt.Kind == "" {
		e.Attempt = Attempt{Kind: "first", Number: 1}
	}
	b.events = append(b.events, e)
	return len(b.events)
}

// write writes traffic.jsonl, tools.json and README.md to cfg.Out.
func (b *builder) write(cfg ImportConfig, readme string) (ImportStats, error) {
	var st ImportStats
	sessions := map[string]bool{}
	for i := range b.events {
		e := &b.events[i]
		st.Events++
		sessions[e.Tenant+"\x00"+e.Session] = true
		switch {
		case e.Truth == nil:
			st.Unlabelled++
		case e.Truth.Expect == "duplicate":
			st.Duplicates++
		case e.HasTag("hard-negative"):
			st.HardNegatives++
		}
	}
	st.Sessions = len(sessions)
	if st.Events == 0 {
		return st, fmt.Errorf("%w: %s: no events", ErrImport, cfg.Src)
	}
	// The set must read back.
	var buf bytes.Buffer
	if err := WriteEvents(&buf, b.events); err != nil {
		return st, err
	}
	if _, err := ReadEvents(bytes.NewReader(buf.Bytes())); err != nil {
		return st, fmt.Errorf("bench: import produced an invalid set: %w", err)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return st, err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "traffic.jsonl"), buf.Bytes(), 0o644); err != nil {
		return st, err
	}
	if len(b.tools) > 0 {
		tools, err := json.MarshalIndent(b.tools, "", " ")
		if err != nil {
			return st, err
		}
		if err := os.WriteFile(filepath.Join(cfg.Out, "tools.json"), append(tools, '\n'), 0o644); err != nil {
			return st, err
		}
	}
	if cfg.Limit > 0 {
		readme += fmt.Sprintf("\nImported with `--limit %d`.\n", cfg.Limit)
	}
	readme += fmt.Sprintf("\n## Contents\n\n%d events in %d sessions: %d expected duplicates, %d hard negatives, %d unlabelled.\n",
		st.Events, st.Sessions, st.Duplicates, st.HardNegatives, st.Unlabelled)
	return st, os.WriteFile(filepath.Join(cfg.Out, "README.md"), []byte(readme), 0o644)
}

// pick is a deterministic coin: true for about one in n of the keys.
func pick(key string, n uint32) bool {
	h := fnv.New32a()
	h.Write([]byte(key))
	return h.Sum32()%n == 0
}

// reorderedString re-encodes a JSON object with its keys in reverse order
// and returns it as a JSON string holding the object: two transformations
// that cannot change meaning.
func reorderedString(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return args
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(keys)))
	var b strings.Builder
	b.WriteString("{ ")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",  ")
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteString(": ")
		b.Write(m[k])
	}
	b.WriteString(" }")
	s, _ := json.Marshal(b.String())
	return s
}

// mustJSON encodes v without HTML escaping.
func mustJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only plain data reaches here
	}
	return bytes.TrimSpace(b.Bytes())
}

// readJSONL decodes every line of a JSON-lines file with fn.
func readJSONL(path string, fn func(line []byte) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrImport, err)
	}
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("%w: %s:%d: %v", ErrImport, path, i+1, err)
		}
	}
	return nil
}
