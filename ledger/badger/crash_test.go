package badger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/ledger"
)

// The crash child is this test binary re-executed with these variables set.
const (
	envCrashDir = "IDEM_LEDGER_CRASH_DIR"
	envCrashRun = "IDEM_LEDGER_CRASH_RUN"
	// envCrashCycles sets how many kills TestCrash makes (the long test:
	// IDEM_CRASH_CYCLES=100 go test -run '^TestCrash$' ./ledger/badger).
	envCrashCycles = "IDEM_CRASH_CYCLES"
)

const (
	crashRuns  = 20        // kills in a plain run; IDEM_CRASH_CYCLES sets another number
	crashLease = time.Hour // the child's leases; the parent looks from 2 h later
)

// crashResult is the result the child records for key number i: some small,
// some past the value threshold so they live in the value log.
func crashResult(key string, i int) json.RawMessage {
	pad := 64 * (i % 8)
	if i%25 == 0 {
		pad = 100 << 10
	}
	b, _ := json.Marshal(map[string]any{"key": key, "n": i, "pad": strings.Repeat("x", pad)})
	return b
}

// TestCrash kills a child that claims and completes records as fast as it
// can with SIGKILL at random moments, 20 times (IDEM_CRASH_CYCLES sets another
// number: 100 in the long test), and after each kill reopens
// the store and checks that every completion the child acknowledged (wrote
// to a side file, fsynced, after Complete returned) is there and intact,
// that every record decodes, and that every claim it left PENDING comes
// back as uncertain once its lease is over.
func TestCrash(t *testing.T) {
	if dir := os.Getenv(envCrashDir); dir != "" {
		crashChild(t, dir, os.Getenv(envCrashRun))
		return
	}
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	dir := t.TempDir()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	completed, pending := 0, 0
	runs := crashCycles(t)
	for run := range runs {
		ack := filepath.Join(dir, fmt.Sprintf("ack-%02d", run))
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrash$", "-test.count=1")
		cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashRun+"="+strconv.Itoa(run))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill it at a random moment after its first acknowledgement.
		waitForFile(t, ack, cmd)
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait() // "signal: killed"
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("crash child %d ended by itself (%v) before the kill", run, cmd.ProcessState)
		}

		c, p := verifyAfterCrash(ctx, t, dir, run)
		completed, pending = completed+c, pending+p
	}
	t.Logf("%d kills; %d completions acknowledged, 0 lost; %d checks of acknowledged completions and %d of pending claims (every earlier run re-checked after each kill)",
		runs, ackedCompletions(t, dir, runs), completed, pending)
}

// waitForFile waits until the child has acknowledged something.
func waitForFile(t *testing.T, path string, cmd *exec.Cmd) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	t.Fatal("crash child acknowledged nothing in 60 s")
}

// crashChild runs until killed: claim, complete (or, every tenth key, leave
// PENDING), then append "C key i" or "P key i" to the acknowledgement file
// and fsync it.
func crashChild(t *testing.T, dir, run string) {
	s, err := Open(DefaultConfig(filepath.Join(dir, "db")))
	if err != nil {
		t.Fatalf("child open: %v", err)
	}
	cfg := ledger.DefaultConfig()
	cfg.Lease = crashLease
	l, err := ledger.New(s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(run)
	if err != nil {
		t.Fatalf("child run %q: %v", run, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("ack-%02d", n)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; ; i++ {
		key := fmt.Sprintf("r%s-%06d", run, i)
		c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: key, Session: "s" + run, Workflow: "w" + run,
			Tool: "tool", Canonical: []byte(key), Embedding: []float32{float32(i), 1}})
		if err != nil || c.Outcome != ledger.Claimed {
			t.Fatalf("child claim %s: %v %v", key, c.Outcome, err)
		}
		kind := "P"
		if i%10 != 9 {
			if _, err := l.Complete(ctx, "t", key, c.Token, crashResult(key, i)); err != nil {
				t.Fatalf("child complete %s: %v", key, err)
			}
			kind = "C"
		}
		if _, err := fmt.Fprintf(f, "%s %s %d\n", kind, key, i); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

// verifyAfterCrash reopens the store and checks every acknowledgement of
// runs 0..run. It returns how many completions and pending claims it checked.
func verifyAfterCrash(ctx context.Context, t *testing.T, dir string, run int) (completed, pending int) {
	t.Helper()
	s, err := Open(DefaultConfig(filepath.Join(dir, "db")))
	if err != nil {
		t.Fatalf("reopen after kill %d: %v", run, err)
	}
	defer func() {
		if err := s.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	later := func() time.Time { return time.Now().Add(2 * crashLease) }
	l := newLedger(t, s, func(c *ledger.Config) { c.Now = later })

	checkRecordsDecode(t, s, fmt.Sprint("after kill ", run))

	for r := 0; r <= run; r++ {
		acked := readAcks(t, filepath.Join(dir, fmt.Sprintf("ack-%02d", r)))
		c, p := verifyAcks(ctx, t, l, acked, fmt.Sprint("s", r), fmt.Sprintf("after kill %d", run))
		completed, pending = completed+c, pending+p
	}
	return completed, pending
}

// verifyAcks checks that every acknowledgement in acked holds: each
// completion is there with its result, each pending claim is uncertain (l
// looks from past its lease), and session lists every acknowledged record
// in acknowledgement order. It returns how many of each it checked.
func verifyAcks(ctx context.Context, t *testing.T, l *ledger.Ledger, acked []crashAck, session, when string) (completed, pending int) {
	t.Helper()
	for _, a := range acked {
		c, err := l.Get(ctx, "t", a.key)
		if err != nil {
			t.Fatalf("%s: acknowledged %s %s: %v", when, a.kind, a.key, err)
		}
		switch a.kind {
		case "C":
			completed++
			if c.Outcome != ledger.Duplicate || string(c.Record.Result) != string(crashResult(a.key, a.i)) {
				t.Fatalf("%s: acknowledged completion %s is %v with a %d-byte result", when, a.key, c.Outcome, len(c.Record.Result))
			}
		case "P":
			pending++
			if c.Outcome != ledger.Uncertain {
				t.Fatalf("%s: pending %s past its lease is %v, want uncertain", when, a.key, c.Outcome)
			}
		}
	}
	recs, err := l.Session(ctx, "t", session, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, rec := range recs {
		pos[rec.Key] = i
	}
	last := -1
	for _, a := range acked {
		p, ok := pos[a.key]
		if !ok || p <= last {
			t.Fatalf("%s: session %s lists %s at %d (present %v), previous ack at %d", when, session, a.key, p, ok, last)
		}
		last = p
	}
	return completed, pending
}

type crashAck struct {
	kind, key string
	i         int
}

// readAcks parses an acknowledgement file; a torn last line (the kill
// landed mid-write, before the fsync that acknowledges it) is ignored.
func readAcks(t *testing.T, path string) []crashAck {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []crashAck
	for _, line := range lines[:len(lines)-1] { // the last piece has no newline: torn or empty
		parts := strings.Fields(line)
		if len(parts) != 3 {
			t.Fatalf("%s: bad acknowledgement %q", path, line)
		}
		i, err := strconv.Atoi(parts[2])
		if err != nil {
			t.Fatalf("%s: bad acknowledgement %q", path, line)
		}
		out = append(out, crashAck{parts[0], parts[1], i})
	}
	return out
}

// crashCycles is how many kills TestCrash makes: crashRuns, or the number
// in IDEM_CRASH_CYCLES.
func crashCycles(t *testing.T) int {
	v := os.Getenv(envCrashCycles)
	if v == "" {
		return crashRuns
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number of kills", envCrashCycles, v)
	}
	return n
}

// ackedCompletions counts the completions acknowledged in runs 0..runs-1.
func ackedCompletions(t *testing.T, dir string, runs int) int {
	n := 0
	for r := range runs {
		for _, a := range readAcks(t, filepath.Join(dir, fmt.Sprintf("ack-%02d", r))) {
			if a.kind == "C" {
				n++
			}
		}
	}
	return n
}
