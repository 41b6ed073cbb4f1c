package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/idem-dev/idem", Version: "v0.0.0-20261129103559-134316cab1f0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "134316cab1f0d35a3e1d6f0b6f8c1e4f1c0a9d2e"},
			{Key: "vcs.time", Value: "2026-11-29T10:35:59Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := versionText(info, "")
	for _, want := range []string{
		"idem v0.0.0-20261129103559-134316cab1f0\n",
		"revision 134316cab1f0d35a3e1d6f0b6f8c1e4f1c0a9d2e (with uncommitted changes)\n",
		"time     2026-11-29T10:35:59Z\n",
		"go       go1.26.8 ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("versionText lacks %q:\n%s", want, got)
		}
	}
	if got := versionText(info, "v1.2.0"); !strings.HasPrefix(got, "idem v1.2.0\n") {
		t.Errorf("an -ldflags version does not replace the module's:\n%s", got)
	}
	if got := versionText(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, ""); !strings.Contains(got, "idem (devel)\n") || !strings.Contains(got, "revision unknown") {
		t.Errorf("without VCS settings:\n%s", got)
	}
	if got := versionText(nil, ""); !strings.HasPrefix(got, "idem (unknown)\n") {
		t.Errorf("without build info:\n%s", got)
	}
}

// TestVersionOfABuild builds idem from a clone of this repository, as a
// user does, and checks that `idem version` names the commit it was built
// from and its time.
func TestVersionOfABuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: not in -short")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not on PATH")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	root, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git checkout")
	}
	// A clone (go build records VCS information only at the root of a
	// repository, not in a linked worktree), with the working tree's
	// uncommitted changes copied over it so that this code is what runs.
	src := strings.TrimSpace(string(root))
	dir := filepath.Join(t.TempDir(), "idem")
	if out, err := exec.Command(git, "clone", "-q", src, dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	changed, err := exec.Command(git, "-C", src, "ls-files", "-z", "--modified", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	modified := false
	for _, f := range strings.Split(strings.TrimRight(string(changed), "\x00"), "\x00") {
		if f == "" {
			continue
		}
		modified = true
		data, err := os.ReadFile(filepath.Join(src, f))
		if os.IsNotExist(err) {
			os.Remove(filepath.Join(dir, f))
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	head, err := exec.Command(git, "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	commitTime, err := exec.Command(git, "-C", dir, "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "idem")
	build := exec.Command(goBin, "build", "-o", bin, "./cmd/idem")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "TZ=UTC")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	rev := strings.TrimSpace(string(head))
	wantRev := "revision " + rev + "\n"
	if modified {
		wantRev = "revision " + rev + " (with uncommitted changes)\n"
	}
	for _, want := range []string{
		"idem v", // a tag, or the pseudo-version go build derives from the commit
		wantRev,
		"time     " + strings.TrimSpace(string(commitTime)) + "\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("idem version lacks %q:\n%s", want, out)
		}
	}
}
