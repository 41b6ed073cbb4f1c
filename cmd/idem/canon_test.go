package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func runIdem(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCanonCommandPrintsCanonicalFormAndClasses(t *testing.T) {
	call := `{"tool":"send_email","arguments":"{\"to\":\"ann@example.com\",\"subject\":\"Your invoice for May\",\"n\":1.0}"}`
	code, out, errs := runIdem(t, "", "canon", call)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		`{"n":1,"subject":"Your invoice for May","to":"ann@example.com"}`,
		"subject", "text", "heuristic:name=subject", "to", "identity", "heuristic:email",
		"hash", "identity digest",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The same call from stdin, as JSON.
	code, out, errs = runIdem(t, call, "canon", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Canonical json.RawMessage `json:"canonical"`
		Hash      string          `json:"hash"`
		Fields    []struct{ Path, Class, Rule string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if string(got.Canonical) != `{"n":1,"subject":"Your invoice for May","to":"ann@example.com"}` || len(got.Hash) != 16 || len(got.Fields) != 3 {
		t.Errorf("unexpected --json output: %s", out)
	}
}

func TestCanonCommandUsesToolSchemas(t *testing.T) {
	// tau-bench's airline tools (MIT), as committed with the traffic set.
	tools := filepath.Join("..", "..", "testdata", "traffic", "tau-airline", "tools.json")
	code, out, errs := runIdem(t, "", "canon", "--tools", tools, `{"tool":"book_reservation","arguments":{"cabin":"economy","user_id":"mia_li_3668"}}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "schema:enum") {
		t.Errorf("the schema's enum did not decide the cabin's class:\n%s", out)
	}
}

func TestCanonCommandReadsRelativeDatesOnTheReferenceDay(t *testing.T) {
	call := `{"tool":"book","arguments":{"restaurant":"Sino","date":"next Monday"}}`
	code, out, errs := runIdem(t, "", "canon", "--reference-time", "2019-03-01T21:00:00-08:00", call)
	if code != 0 || !strings.Contains(out, "(date 2019-03-04)") {
		t.Errorf("exit %d, %s\n%s: want next Monday read as 2019-03-04", code, errs, out)
	}
	if _, out, _ = runIdem(t, "", "canon", call); strings.Contains(out, "(date ") {
		t.Errorf("next Monday read without a reference date:\n%s", out)
	}
	if code, _, errs = runIdem(t, "", "canon", "--reference-time", "Friday", call); code != 2 || !strings.Contains(errs, "--reference-time") {
		t.Errorf("a bad --reference-time: exit %d, %q", code, errs)
	}
}

func TestCanonCommandRejectsBadInputWithOneLine(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"duplicate key", `{"tool":"t","arguments":{"a":{"b":1,"b":2}}}`, `arguments.a: duplicate key "b"`},
		{"not an object", `{"tool":"t","arguments":[1]}`, "arguments: want a JSON object"},
		{"missing tool", `{"arguments":{}}`, "tool: missing"},
		{"missing arguments", `{"tool":"t"}`, "arguments: missing"},
		{"unknown key", `{"tool":"t","arguments":{},"extra":1}`, `unknown field "extra"`},
		{"wrong type", `{"tool":5,"arguments":{}}`, "tool: want string"},
		{"malformed", `{"tool":"t",`, "input:"},
		{"empty tool", `{"tool":"","arguments":{}}`, "tool: empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runIdem(t, tc.in, "canon")
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out != "" {
				t.Errorf("printed to stdout on error: %q", out)
			}
			if strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "idem canon: ") || !strings.Contains(errs, tc.want) {
				t.Errorf("stderr %q: want one line naming %q", errs, tc.want)
			}
		})
	}
}

func TestVersionAndUnknownCommand(t *testing.T) {
	if code, out, _ := runIdem(t, "", "version"); code != 0 || !strings.HasPrefix(out, "idem ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version: exit %d, %q", code, out)
	}
	if code, _, errs := runIdem(t, "", "nope"); code != 2 || !strings.Contains(errs, `unknown command "nope"`) {
		t.Errorf("unknown command: exit %d, %q", code, errs)
	}
}

func TestCanonCommandGradesAgainstAnotherCall(t *testing.T) {
	earlier := `{"tool":"book","arguments":{"city":"Santa Rosa","date":"2019-03-04","restaurant_name":"Tandoori Mahal Indian Restaurant","time":"19:30"}}`
	call := `{"tool":"book","arguments":{"city":"Santa ROsa","date":"March 4th","restaurant_name":"Tandoori Mahal","time":"20:30"}}`
	code, out, errs := runIdem(t, "", "canon", "--reference-time", "2019-03-01", "--against", earlier, call)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		`restated\s+"March 4th" = "2019-03-04" \(the year of the reference date 2019-03-01\)`,
		`restated\s+"Santa ROsa" = "Santa Rosa" \(case and spacing\)`,
		`restated\s+"Tandoori Mahal" = "Tandoori Mahal Indian Restaurant"`,
		`against: different: 3 identity values restated, 1 different`,
	} {
		if !regexpMatch(want, out) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexpMatch(`time\s+identity.*"20:30"\s+\(time 20:30\)\s+different`, out) {
		t.Errorf("one hour later is not graded different:\n%s", out)
	}
	// The call to compare against from a file, JSON out.
	file := filepath.Join(t.TempDir(), "earlier.json")
	if err := os.WriteFile(file, []byte(earlier), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runIdem(t, "", "canon", "--json", "--reference-time", "2019-03-01", "--against", file, call)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Against struct {
			Overall string
			Leaves  []struct{ Path, Grade, Rule, Reading string }
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	grades := map[string]string{}
	for _, l := range got.Against.Leaves {
		grades[l.Path] = l.Grade + " " + l.Rule
	}
	if got.Against.Overall != "different" || grades["date"] != "restated year" || grades["time"] != "different " || grades["city"] != "restated case" {
		t.Errorf("--json against: %+v", got.Against)
	}
	// Without a reference date the year is not read.
	if _, out, _ = runIdem(t, "", "canon", "--against", earlier, call); strings.Contains(out, "reference date") {
		t.Errorf("a year read without a reference date:\n%s", out)
	}
	for _, bad := range []string{filepath.Join(t.TempDir(), "missing.json"), `{"tool":"book"}`} {
		if code, _, errs = runIdem(t, "", "canon", "--against", bad, call); code != 2 || !strings.HasPrefix(errs, "idem canon: --against: ") {
			t.Errorf("--against %s: exit %d, %q", bad, code, errs)
		}
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }
