package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReportHTMLStatic checks the report's structure without a browser:
// self-contained (no external resource), one chart per kind, thresholds
// and the budget line drawn.
func TestReportHTMLStatic(t *testing.T) {
	r := runSet(t, "testdata/stsb-dev-small", DefaultConfig())
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"http://", "https://", "<script src", "<link"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("report.html contains %q: it must be self-contained", bad)
		}
	}
	for _, want := range []string{`data-chart="precision-recall"`, `data-chart="latency-cdf"`, `data-chart="histogram:add_issue_comment"`,
		`class="threshold"`, "budget 50 ms", "dup 0.90", "funnel write", "baseline write"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}

// TestReportHTMLChromium opens report.html in headless Chromium and checks
// from the DOM it dumps that every chart was laid out with its shapes
// (the page's inline script marks each rendered chart).
func TestReportHTMLChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not on PATH (Debian: apt-get install -y chromium); skipping the browser check of report.html")
	}
	r := runSet(t, "testdata/stsb-dev-small", DefaultConfig())
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteHTML(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--dump-dom", "file://"+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	charts := strings.Count(string(dom), `class="chart"`)
	if charts < 3 {
		t.Fatalf("the DOM holds %d charts, want at least 3", charts)
	}
	m := regexp.MustCompile(`data-charts-rendered="(\d+)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's script did not run: no data-charts-rendered in the DOM")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != charts {
		t.Errorf("%d of %d charts rendered", n, charts)
	}
	if strings.Contains(string(dom), `data-rendered="no"`) {
		t.Errorf("a chart rendered empty")
	}
}
