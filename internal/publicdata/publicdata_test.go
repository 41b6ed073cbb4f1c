package publicdata

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB whose Skipf and Fatalf record the message and
// stop the goroutine, as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// path calls Path on a recorder in its own goroutine (Skipf and Fatalf end
// it) and returns what it returned and recorded.
func path(t *testing.T, elem ...string) (string, *recorder) {
	r := &recorder{TB: t}
	got := make(chan string, 1)
	go func() {
		defer close(got)
		got <- Path(r, elem...)
	}()
	return <-got, r
}

func TestPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "upstream", "sgd"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, dir)

	if p, r := path(t, "upstream/sgd"); p != filepath.Join(dir, "upstream", "sgd") || r.skipped != "" || r.failed != "" {
		t.Errorf("present folder: %q, skipped %q, failed %q", p, r.skipped, r.failed)
	}

	missing := filepath.Join(dir, "upstream", "bfcl")
	p, r := path(t, "upstream", "bfcl")
	if p != "" || r.failed != "" || !strings.HasPrefix(r.skipped, "public data") || !strings.Contains(r.skipped, missing) || !strings.Contains(r.skipped, EnvDir) {
		t.Errorf("missing folder: returned %q, failed %q, skip message %q: want a skip naming %s and %s", p, r.failed, r.skipped, missing, EnvDir)
	}

	// A folder on the way is missing: the message names it.
	if _, r := path(t, "use-lite", "reference.json"); !strings.Contains(r.skipped, "no folder "+filepath.Join(dir, "use-lite")+" ") {
		t.Errorf("missing parent folder: skip message %q does not name %s", r.skipped, filepath.Join(dir, "use-lite"))
	}
}

// TestDirDefaultsBesideTheCheckout: without IDEM_PUBLIC_DATA the data is
// looked for in shared/data beside the repository root.
func TestDirDefaultsBesideTheCheckout(t *testing.T) {
	t.Setenv(EnvDir, "")
	got, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	root := filepath.Dir(filepath.Dir(wd)) // internal/publicdata → the repository root
	if want := filepath.Join(filepath.Dir(root), "shared", "data"); got != want {
		t.Errorf("Dir() = %s, want %s", got, want)
	}
}
