// Package publicdata finds the public data sets that some tests and
// benchmarks read (tau-bench, SGD, BFCL, STS-B, ToolBench, the MCP tool
// snapshots, the encoder's reference outputs) and skips them, naming the
// missing folder, where the data is absent.
//
// The data is not part of the repository (it is large and under its
// owners' licences; docs/traffic.md says where each set comes from). It
// is looked for in the folder IDEM_PUBLIC_DATA names, else in
// ../shared/data from the repository root, where CI lays it beside the
// checkout. What a test needs to pass without it is committed under
// testdata/.
//
// Every skip message starts with "public data": scripts/test fails a run
// that has the data beside the checkout yet skipped a test for want of it.
package publicdata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// EnvDir names another folder holding the data (its layout: upstream/,
// use-lite/).
const EnvDir = "IDEM_PUBLIC_DATA"

// Dir returns the data folder: $IDEM_PUBLIC_DATA, else ../shared/data from
// the root of the module that contains the working directory. The folder
// need not exist.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return filepath.Abs(d)
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(root), "shared", "data"), nil
}

// Path returns the data file or folder at elem under Dir (elem in slash
// form is fine: "upstream/sgd"). When it does not exist the test is
// skipped with a message naming the missing folder.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	dir, err := Dir()
	if err != nil {
		t.Fatalf("publicdata: %v", err)
	}
	p := filepath.Join(append([]string{dir}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		what := "no " + p
		if m := firstMissing(p); m != p {
			what = fmt.Sprintf("no folder %s (wanted %s)", m, p)
		}
		if !errors.Is(err, os.ErrNotExist) {
			what = fmt.Sprintf("%s unreadable (%v)", p, err)
		}
		t.Skipf("public data: %s; CI lays shared/data beside the checkout, elsewhere fetch the sets docs/traffic.md lists or set %s", what, EnvDir)
	}
	return p
}

// firstMissing is the outermost folder on the way to p that does not
// exist (p itself when only p is missing).
func firstMissing(p string) string {
	for {
		parent := filepath.Dir(p)
		if parent == p {
			return p
		}
		if _, err := os.Stat(parent); err == nil {
			return p
		}
		p = parent
	}
}

// moduleRoot is the nearest folder at or above the working directory that
// holds a go.mod (go test runs a package's tests in its folder).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s", wd)
		}
	}
}
