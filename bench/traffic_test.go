package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodLine = `{"t_ms": 0, "session": "s", "workflow": "w", "step": "1", "tool": "t", "arguments": {"a": 1}, "attempt": {"kind": "first", "number": 1}, "truth": {"expect": "execute"}}`

func TestReadEventsErrors(t *testing.T) {
	tests := []struct {
		name  string
		input string
		line  int
		field string
	}{
		{"not an object", "[1]", 1, ""},
		{"broken JSON", `{"t_ms": 1,`, 1, ""},
		{"unknown field", `{"t_ms": 0, "session": "s", "tool": "t", "arguments": {}, "sesion": "x"}`, 1, "sesion"},
		{"wrong type", `{"t_ms": "soon", "session": "s", "tool": "t", "arguments": {}}`, 1, "t_ms"},
		{"no session", `{"t_ms": 0, "tool": "t", "arguments": {}}`, 1, "session"},
		{"no tool", `{"t_ms": 0, "session": "s", "arguments": {}}`, 1, "tool"},
		{"no arguments", `{"t_ms": 0, "session": "s", "tool": "t"}`, 1, "arguments"},
		{"arguments an array", `{"t_ms": 0, "session": "s", "tool": "t", "arguments": [1]}`, 1, "arguments"},
		{"arguments a string without an object", `{"t_ms": 0, "session": "s", "tool": "t", "arguments": "hello"}`, 1, "arguments"},
		{"bad attempt kind", `{"t_ms": 0, "session": "s", "tool": "t", "arguments": {}, "attempt": {"kind": "again"}}`, 1, "attempt.kind"},
		{"bad outcome", `{"t_ms": 0, "session": "s", "tool": "t", "arguments": {}, "outcome": {"status": "ok"}}`, 1, "outcome.status"},
		{"bad expect", `{"t_ms": 0, "session": "s", "tool": "t", "arguments": {}, "truth": {"expect": "dup"}}`, 1, "truth.expect"},
		{"missing expect", `{"t_ms": 0, "session": "s", "tool": "t", "arguments": {}, "truth": {"intent": "i"}}`, 1, "truth.expect"},
		{"out of order", goodLine + "\n" + strings.Replace(goodLine, `"t_ms": 0`, `"t_ms": -0`, 1) + "\n" +
			strings.Replace(goodLine, `"t_ms": 0`, `"t_ms": 5`, 1) + "\n" + goodLine, 4, "t_ms"},
		{"truth.of not earlier", goodLine + "\n\n" + strings.Replace(goodLine, `"expect": "execute"`, `"expect": "duplicate", "of": 3`, 1), 3, "truth.of"},
		{"line numbers count blank lines", "\n\n" + goodLine + "\n" + `{"t_ms": 9}`, 4, "session"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadEvents(strings.NewReader(tt.input))
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want a *LineError matching ErrInvalid", err)
			}
			if le.Line != tt.line || le.Field != tt.field {
				t.Errorf("line %d field %q, want line %d field %q (%v)", le.Line, le.Field, tt.line, tt.field, err)
			}
		})
	}
}

func TestReadEventsDefaults(t *testing.T) {
	evs, err := ReadEvents(strings.NewReader(`{"t_ms": 3, "session": "s", "tool": "t", "arguments": "{\"a\": 1}", "key": null}`))
	if err != nil {
		t.Fatal(err)
	}
	e := evs[0]
	if e.Tenant != "default" || e.Attempt.Kind != "first" || e.Attempt.Number != 1 || e.Line != 1 || e.Labelled() {
		t.Errorf("defaults not applied: %+v", e)
	}
	if _, err := ReadEvents(strings.NewReader("\n \n")); !errors.Is(err, ErrNoEvents) {
		t.Errorf("empty set: err = %v, want ErrNoEvents", err)
	}
}

// TestCommittedSetsRead reads every committed traffic set: each must be
// valid, labelled (but the chat log), and carry a README.
func TestCommittedSetsRead(t *testing.T) {
	dirs, _ := filepath.Glob("../testdata/traffic/*")
	more, _ := filepath.Glob("testdata/*")
	dirs = append(dirs, more...)
	if len(dirs) < 5 {
		t.Fatalf("found %d traffic sets", len(dirs))
	}
	var total int64
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "traffic.jsonl")); err != nil {
			continue // not a traffic set (a README, the chat log source)
		}
		set, err := ReadDir(dir)
		if err != nil {
			t.Errorf("%s: %v", dir, err)
			continue
		}
		if !set.Labelled() && !strings.Contains(dir, "chat") {
			t.Errorf("%s: not labelled", dir)
		}
		if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
			t.Errorf("%s: no README.md", dir)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			st, _ := os.Stat(f)
			total += st.Size()
		}
	}
	if total > 3<<20 {
		t.Errorf("committed sets take %d bytes; keep them small for CI", total)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	evs, err := ReadEvents(strings.NewReader(goodLine))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteEvents(&b, evs); err != nil {
		t.Fatal(err)
	}
	again, err := ReadEvents(&b)
	if err != nil || len(again) != 1 || again[0].Tool != "t" || again[0].Truth.Expect != "execute" {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
}

func FuzzReadEvents(f *testing.F) {
	f.Add(goodLine)
	f.Add(goodLine + "\n" + goodLine)
	f.Add(`{"t_ms": 0, "session": "s", "tool": "t", "arguments": "{\"a\":1}", "outcome": {"status": "timeout"}}`)
	f.Add(`{"t_ms": 1, "session": "s", "tool": "t", "arguments": {}, "truth": {"expect": "duplicate", "of": 1}}`)
	f.Add("\n\n{}\n")
	f.Fuzz(func(t *testing.T, in string) {
		evs, err := ReadEvents(strings.NewReader(in))
		if err != nil {
			var le *LineError
			if errors.As(err, &le) && (le.Line < 1 || le.Line > strings.Count(in, "\n")+1) {
				t.Fatalf("error names line %d of a %d-line input", le.Line, strings.Count(in, "\n")+1)
			}
			return
		}
		// Whatever is read writes back and reads again to the same events.
		var b bytes.Buffer
		if err := WriteEvents(&b, evs); err != nil {
			t.Fatal(err)
		}
		again, err := ReadEvents(&b)
		if err != nil {
			t.Fatalf("re-reading written events: %v", err)
		}
		if len(again) != len(evs) {
			t.Fatalf("%d events became %d", len(evs), len(again))
		}
		for i := range evs {
			if evs[i].Session == "" || evs[i].Tool == "" || again[i].TMS != evs[i].TMS {
				t.Fatalf("event %d changed: %+v vs %+v", i, evs[i], again[i])
			}
		}
	})
}
