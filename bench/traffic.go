// Package bench replays labelled agent traffic through idem's funnel,
// scores every decision, calibrates thresholds per action type, and turns
// public data sets into labelled traffic sets.
//
// A traffic set is a folder holding traffic.jsonl (one event per line, in
// arrival order), optionally tools.json (tool definitions) and README.md;
// the format (v1) and the scoring rules are those of TRAFFIC.md:
// a decision other than execute flags an event; an event expected to be a
// duplicate and flagged is a true positive, expected to execute and
// flagged a false positive, expected to be a duplicate and executed a
// false negative.
//
// Replay runs the real funnel in-process on a fresh temporary Badger
// ledger with the built-in encoder, in virtual time by default: a fake
// clock jumps to each event's t_ms, and each executed event's outcome
// (complete, fail, nothing for a timeout) is reported at t_ms + after_ms.
// Every run also scores a baseline, what semantic caches do: one
// embedding of the whole canonical call and a single cosine threshold,
// with no ledger key and no identity gate.
//
// The charts of the HTML report are hand-written SVG rather than
// gonum.org/v1/plot: three chart kinds of a few dozen lines each do not
// justify its dependency tree, and the report must stay self-contained.
package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/canon"
)

// Errors of reading a traffic set.
var (
	// ErrInvalid: an event breaks the traffic format; the error is a
	// *LineError naming the line and the field.
	ErrInvalid = errors.New("bench: invalid traffic")
	// ErrNoEvents: traffic.jsonl holds no event.
	ErrNoEvents = errors.New("bench: traffic set has no events")
)

// Attempt is an event's place among its retries.
type Attempt struct {
	Kind   string `json:"kind"`
	Number int    `json:"number"`
}

// Outcome is what the tool does if the event is executed.
type Outcome struct {
	Status    string          `json:"status"` // success, failure, timeout
	Result    json.RawMessage `json:"result,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
	Transient bool            `json:"transient,omitempty"`
	AfterMS   int64           `json:"after_ms,omitempty"`
}

// Truth is an event's label.
type Truth struct {
	Intent string `json:"intent,omitempty"`
	Expect string `json:"expect"` // execute, duplicate
	Of     int    `json:"of,omitempty"`
}

// Event is one line of traffic.jsonl.
type Event struct {
	TMS       int64           `json:"t_ms"`
	Tenant    string          `json:"tenant,omitempty"`
	Session   string          `json:"session"`
	Workflow  string          `json:"workflow,omitempty"`
	Step      string          `json:"step,omitempty"`
	Key       string          `json:"key,omitempty"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Attempt   Attempt         `json:"attempt"`
	Outcome   *Outcome        `json:"outcome,omitempty"`
	Truth     *Truth          `json:"truth,omitempty"`
	Tags      []string        `json:"tags,omitempty"`
	// ReferenceTime (an idem extension of the v1 format) is the agent's
	// date or date-time with offset when it made the call, sent as
	// /v1/check's reference_time: relative dates in the arguments are
	// read against it.
	ReferenceTime string `json:"reference_time,omitempty"`

	// Today is ReferenceTime's date, or zero.
	Today canon.Date `json:"-"`
	// Line is the event's 1-based line number in traffic.jsonl.
	Line int `json:"-"`
}

// HasTag reports whether e carries tag.
func (e *Event) HasTag(tag string) bool {
	for _, t := range e.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// Labelled reports whether e carries a truth label.
func (e *Event) Labelled() bool { return e.Truth != nil }

// Set is a traffic set read from a folder.
type Set struct {
	// Name is the folder's base name.
	Name   string
	Events []Event
	// Tools are the definitions from tools.json (nil without one).
	Tools []canon.Tool
}

// Labelled reports whether every event carries a label.
func (s *Set) Labelled() bool {
	for i := range s.Events {
		if !s.Events[i].Labelled() {
			return false
		}
	}
	return len(s.Events) > 0
}

// LineError is a traffic.jsonl line that breaks the format.
type LineError struct {
	Line  int
	Field string
	Msg   string
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("traffic.jsonl:%d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("traffic.jsonl:%d: %s: %s", e.Line, e.Field, e.Msg)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *LineError) Unwrap() error { return ErrInvalid }

// maxLine bounds one event's encoded size.
const maxLine = 4 << 20

// ReadDir reads the traffic set in dir.
func ReadDir(dir string) (*Set, error) {
	f, err := os.Open(filepath.Join(dir, "traffic.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("bench: read traffic set: %w", err)
	}
	defer f.Close()
	events, err := ReadEvents(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	set := &Set{Name: filepath.Base(filepath.Clean(dir)), Events: events}
	data, err := os.ReadFile(filepath.Join(dir, "tools.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("bench: read tools.json: %w", err)
	default:
		if set.Tools, err = canon.ParseTools(data); err != nil {
			return nil, fmt.Errorf("bench: %s/tools.json: %w", dir, err)
		}
	}
	return set, nil
}

// ReadEvents reads and validates traffic.jsonl. Blank lines are skipped.
// The first invalid line ends the read with a *LineError.
func ReadEvents(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var events []Event
	line := 0
	var last int64
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		e, err := parseEvent(b, line)
		if err != nil {
			return nil, err
		}
		if e.TMS < last {
			return nil, &LineError{Line: line, Field: "t_ms", Msg: fmt.Sprintf("%d is before the previous event's %d (events must be in arrival order)", e.TMS, last)}
		}
		last = e.TMS
		if e.Truth != nil && e.Truth.Of >= line {
			return nil, &LineError{Line: line, Field: "truth.of", Msg: fmt.Sprintf("line %d is not an earlier line", e.Truth.Of)}
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{Line: line + 1, Msg: fmt.Sprintf("longer than %d bytes", maxLine)}
		}
		return nil, fmt.Errorf("bench: read traffic: %w", err)
	}
	if len(events) == 0 {
		return nil, ErrNoEvents
	}
	return events, nil
}

func parseEvent(b []byte, line int) (Event, error) {
	fail := func(field, format string, args ...any) (Event, error) {
		return Event{}, &LineError{Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if b[0] != '{' {
		return fail("", "not a JSON object")
	}
	var e Event
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fail(te.Field, "want %s, got JSON %s", te.Type, te.Value)
		}
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return fail(strings.Trim(f, `"`), "unknown field")
		}
		return fail("", "%s", strings.TrimPrefix(msg, "json: "))
	}
	if dec.More() {
		return fail("", "more than one JSON value on the line")
	}
	e.Line = line
	if e.TMS < 0 {
		return fail("t_ms", "negative")
	}
	if e.Tenant == "" {
		e.Tenant = "default"
	}
	if e.Session == "" {
		return fail("session", "missing")
	}
	if e.Tool == "" {
		return fail("tool", "missing")
	}
	if err := checkArguments(e.Arguments); err != "" {
		return fail("arguments", "%s", err)
	}
	if e.ReferenceTime != "" {
		d, err := canon.ParseReference(e.ReferenceTime)
		if err != nil {
			return fail("reference_time", "%v", err)
		}
		e.Today = d
	}
	switch e.Attempt.Kind {
	case "":
		e.Attempt.Kind = "first"
	case "first", "transient", "sampling":
	default:
		return fail("attempt.kind", "%q is not first, transient or sampling", e.Attempt.Kind)
	}
	if e.Attempt.Number < 0 {
		return fail("attempt.number", "negative")
	}
	if e.Attempt.Number == 0 {
		e.Attempt.Number = 1
	}
	if o := e.Outcome; o != nil {
		switch o.Status {
		case "success", "failure", "timeout":
		default:
			return fail("outcome.status", "%q is not success, failure or timeout", o.Status)
		}
		if o.AfterMS < 0 {
			return fail("outcome.after_ms", "negative")
		}
	}
	if t := e.Truth; t != nil {
		switch t.Expect {
		case "execute", "duplicate":
		case "":
			return fail("truth.expect", "missing")
		default:
			return fail("truth.expect", "%q is not execute or duplicate", t.Expect)
		}
		if t.Of < 0 {
			return fail("truth.of", "negative")
		}
	}
	return e, nil
}

// checkArguments: a JSON object, or a JSON string holding one.
func checkArguments(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "missing"
	}
	switch raw[0] {
	case '{':
		return ""
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "bad string"
		}
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
			return "a string that does not hold a JSON object"
		}
		return ""
	}
	return "want a JSON object or a string holding one"
}

// WriteEvents writes events as traffic.jsonl lines.
func WriteEvents(w io.Writer, events []Event) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range events {
		if err := enc.Encode(&events[i]); err != nil {
			return fmt.Errorf("bench: write event %d: %w", i+1, err)
		}
	}
	return bw.Flush()
}
