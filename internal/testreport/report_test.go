package main

import (
	"bytes"
	"strings"
	"testing"
)

// input is a go test -json stream: a passing test that logged, a failing
// one, a skipped one and a skipped subtest, a package without tests, and
// one of go's own non-JSON lines.
const input = `go: downloading example.com/x v1.0.0
{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestPass"}
{"Action":"output","Package":"m/a","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Action":"output","Package":"m/a","Test":"TestPass","Output":"    a_test.go:5: chatter of a passing test\n"}
{"Action":"output","Package":"m/a","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"m/a","Test":"TestPass"}
{"Action":"run","Package":"m/a","Test":"TestFail"}
{"Action":"output","Package":"m/a","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"m/a","Test":"TestFail","Output":"    a_test.go:9: got 2, want 3\n"}
{"Action":"output","Package":"m/a","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"m/a","Test":"TestFail"}
{"Action":"run","Package":"m/a","Test":"TestDB"}
{"Action":"output","Package":"m/a","Test":"TestDB","Output":"=== RUN   TestDB\n"}
{"Action":"output","Package":"m/a","Test":"TestDB","Output":"    db_test.go:12: no database: skipping\n"}
{"Action":"output","Package":"m/a","Test":"TestDB","Output":"--- SKIP: TestDB (0.00s)\n"}
{"Action":"skip","Package":"m/a","Test":"TestDB"}
{"Action":"output","Package":"m/a","Test":"TestData/sub","Output":"    d_test.go:3: no database: skipping\n"}
{"Action":"skip","Package":"m/a","Test":"TestData/sub"}
{"Action":"output","Package":"m/a","Output":"FAIL\n"}
{"Action":"output","Package":"m/a","Output":"FAIL\tm/a\t0.01s\n"}
{"Action":"fail","Package":"m/a"}
{"Action":"output","Package":"m/b","Output":"?   \tm/b\t[no test files]\n"}
{"Action":"skip","Package":"m/b"}
`

func TestReport(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	if err := r.read(strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	bad := r.summary([]string{"no database"})
	got := out.String()
	for _, want := range []string{
		"go: downloading example.com/x v1.0.0\n",
		"    a_test.go:9: got 2, want 3\n--- FAIL: TestFail (0.00s)\n",
		"FAIL\tm/a\t0.01s\n",
		"?   \tm/b\t[no test files]\n",
		"== 2 tests skipped, by reason:\n- no database: skipping\n    m/a: TestDB, TestData/sub\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "chatter of a passing test") {
		t.Errorf("a passing test's output was printed:\n%s", got)
	}
	if bad != 2 {
		t.Errorf("summary counted %d forbidden skips, want 2", bad)
	}
	if n := r.summary([]string{"something else"}); n != 0 {
		t.Errorf("summary counted %d skips for an unrelated text", n)
	}
}

func TestReportNoSkip(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	r.read(strings.NewReader(`{"Action":"pass","Package":"m/a","Test":"TestX"}` + "\n"))
	if r.summary(nil); !strings.Contains(out.String(), "no test skipped") {
		t.Errorf("got %q", out.String())
	}
}

// FuzzReport: any input is read without panicking.
func FuzzReport(f *testing.F) {
	for _, l := range strings.Split(input, "\n") {
		f.Add(l)
	}
	f.Add(`{"Action":"skip"}`)
	f.Add(`{`)
	f.Fuzz(func(t *testing.T, s string) {
		var out bytes.Buffer
		r := newReport(&out)
		if err := r.read(strings.NewReader(s)); err != nil {
			return
		}
		r.summary([]string{""})
	})
}
