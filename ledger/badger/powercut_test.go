package badger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/idem-dev/idem/ledger"
)

// The power-cut child is this test binary re-executed with these set.
const (
	envCutDB   = "IDEM_POWERCUT_DB"   // the database directory (on the image)
	envCutAcks = "IDEM_POWERCUT_ACKS" // the folder for acknowledgements (off it)
	envCutSync = "IDEM_POWERCUT_SYNC" // "off" opens the store without sync writes
	// envCutCycles sets how many cuts TestPowerCut makes (the long test:
	// IDEM_POWERCUT_CYCLES=50 go test -run '^TestPowerCut$' ./ledger/badger).
	envCutCycles = "IDEM_POWERCUT_CYCLES"
)

const (
	cutCycles  = 4 // cuts in a plain run
	cutWriters = 4 // concurrent agents in the child, each its own session
)

// TestPowerCut is the crash test for what SIGKILL cannot show: a machine
// that loses power loses what the kernel had not written to the disk. The
// child writes the ledger on an ext4 file system on a loop device,
// several agents at once (so their writes share fsyncs), with small
// memtables (so write-ahead logs rotate) and some results past the value
// threshold (so the value log is written); after each acknowledgement it
// appends a line to a file off that file system. At a random moment the
// child is killed and the image's backing file is copied at once: the
// copy holds what had reached the device, not the dirty pages still in the
// page cache, as after a power cut. The copy is checked (e2fsck replays
// the journal), mounted, and every acknowledged completion must be there.
//
// It first runs one cycle with sync writes off, which must lose
// acknowledged writes: that shows the copy does stand for a power cut (a
// machine whose kernel wrote back every page before the copy would prove
// nothing, and the test says so and skips).
//
// It needs root (losetup, mount) and e2fsprogs; without them it skips.
func TestPowerCut(t *testing.T) {
	if db := os.Getenv(envCutDB); db != "" {
		powerCutChild(t, db, os.Getenv(envCutAcks), os.Getenv(envCutSync) != "off")
		return
	}
	if testing.Short() {
		t.Skip("spawns child processes and mounts file systems")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to attach loop devices and mount them")
	}
	for _, tool := range []string{"losetup", "mkfs.ext4", "e2fsck", "mount", "umount", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	cycles := cutCycles
	if v := os.Getenv(envCutCycles); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of cuts", envCutCycles, v)
		}
		cycles = n
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	work := t.TempDir()

	acked, lost := powerCutCycle(t, work, "calibrate", false, rng)
	if lost == 0 {
		t.Skipf("with sync writes off, a cut lost none of %d acknowledged writes: this machine's copy of the image does not stand for a power cut", acked)
	}
	t.Logf("sync writes off: the cut lost %d of %d acknowledged writes (as it must)", lost, acked)
	total := 0
	for c := range cycles {
		n, lost := powerCutCycle(t, work, fmt.Sprint("cut", c), true, rng)
		if lost != 0 {
			t.Fatalf("cut %d: %d of %d acknowledged writes lost with sync writes on", c, lost, n)
		}
		total += n
	}
	t.Logf("%d cuts with sync writes on; %d acknowledged writes, 0 lost", cycles, total)
}

// powerCutCycle runs one child on a fresh image, cuts it, and returns how
// many acknowledged writes it checked and how many were missing or wrong.
// With sync writes on, a loss fails the test at once (with the key).
func powerCutCycle(t *testing.T, work, name string, syncOn bool, rng *rand.Rand) (acked, lost int) {
	t.Helper()
	dir := filepath.Join(work, name)
	img, snap, mnt, acks := filepath.Join(dir, "img"), filepath.Join(dir, "snap"), filepath.Join(dir, "mnt"), filepath.Join(dir, "acks")
	for _, d := range []string{mnt, acks} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(img, 192<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.ext4", "-q", "-F", img)
	unmount := mountImage(t, img, mnt)

	cmd := exec.Command(os.Args[0], "-test.run=^TestPowerCut$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCutDB+"="+filepath.Join(mnt, "db"), envCutAcks+"="+acks)
	if !syncOn {
		cmd.Env = append(cmd.Env, envCutSync+"=off")
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForFile(t, filepath.Join(acks, "ack-0"), cmd)
	time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The cut: what the device holds now, without the page cache's dirty
	// pages (unmounting would write them).
	run(t, "cp", "--sparse=always", img, snap)
	unmount()

	out, err := exec.Command("e2fsck", "-fy", snap).CombinedOutput()
	if code := exitCode(err); code > 1 { // 1: errors corrected
		t.Fatalf("e2fsck of the cut image: exit %d: %s", code, out)
	}
	unmount = mountImage(t, snap, mnt)
	defer unmount()
	s, err := Open(DefaultConfig(filepath.Join(mnt, "db")))
	if err != nil {
		t.Fatalf("%s: opening the store after the cut: %v", name, err)
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if syncOn { // without, a record may well point into a value log that was lost
		checkRecordsDecode(t, s, name)
	}
	later := func() time.Time { return time.Now().Add(2 * crashLease) }
	l := newLedger(t, s, func(c *ledger.Config) { c.Now = later })
	ctx := context.Background()
	for g := range cutWriters {
		a := readAcks(t, filepath.Join(acks, fmt.Sprint("ack-", g)))
		acked += len(a)
		if syncOn {
			verifyAcks(ctx, t, l, a, cutSession(g), fmt.Sprintf("%s, agent %d", name, g))
			continue
		}
		lost += lostAcks(ctx, l, a)
	}
	return acked, lost
}

// lostAcks counts the acknowledgements in acked that the ledger does not
// hold as acknowledged.
func lostAcks(ctx context.Context, l *ledger.Ledger, acked []crashAck) int {
	n := 0
	for _, a := range acked {
		c, err := l.Get(ctx, "t", a.key)
		switch {
		case err != nil:
			n++
		case a.kind == "C" && (c.Outcome != ledger.Duplicate || string(c.Record.Result) != string(crashResult(a.key, a.i))):
			n++
		case a.kind == "P" && c.Outcome != ledger.Uncertain:
			n++
		}
	}
	return n
}

// checkRecordsDecode fails the test if a stored record (or a record
// stored in pieces) does not decode.
func checkRecordsDecode(t *testing.T, s *Store, when string) {
	t.Helper()
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindRecord}, PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()[1:]
			n, w := binary.Uvarint(k)
			if w <= 0 || uint64(len(k)-w) < n {
				return fmt.Errorf("record key %q does not parse", it.Item().Key())
			}
			tenant, key := string(k[w:w+int(n)]), string(k[w+int(n):])
			if _, _, err := getRecord(txn, tenant, key); err != nil {
				return fmt.Errorf("record %q: %w", key, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
}

func cutSession(g int) string { return fmt.Sprint("cut-", g) }

// powerCutChild runs cutWriters agents until killed: each claims and
// completes (or, every tenth key, leaves PENDING) keys of its session,
// appending "C key i" or "P key i" to its acknowledgement file once the
// ledger answered (no fsync: the file is off the image, and a power cut
// of the image does not touch it).
func powerCutChild(t *testing.T, db, acks string, syncOn bool) {
	cfg := DefaultConfig(db)
	cfg.SyncWrites = syncOn
	cfg.MemTableSize = 1 << 20 // rotate write-ahead logs often
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("child open: %v", err)
	}
	lcfg := ledger.DefaultConfig()
	lcfg.Lease = crashLease
	l, err := ledger.New(s, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range cutWriters {
		f, err := os.OpenFile(filepath.Join(acks, fmt.Sprint("ack-", g)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			session := cutSession(g)
			for i := 0; ; i++ {
				key := fmt.Sprintf("%s-%06d", session, i)
				c, err := l.Claim(ctx, ledger.ClaimRequest{Tenant: "t", Key: key, Session: session, Workflow: "w-" + session,
					Tool: "tool", Canonical: []byte(key), Embedding: []float32{float32(i), 1}})
				if err != nil || c.Outcome != ledger.Claimed {
					t.Errorf("child claim %s: %v %v", key, c.Outcome, err)
					return
				}
				kind := "P"
				if i%10 != 9 {
					if _, err := l.Complete(ctx, "t", key, c.Token, crashResult(key, i)); err != nil {
						t.Errorf("child complete %s: %v", key, err)
						return
					}
					kind = "C"
				}
				if _, err := fmt.Fprintf(f, "%s %s %d\n", kind, key, i); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// mountImage attaches img to a free loop device and mounts it on mnt; the
// returned function (also run at cleanup) unmounts and detaches it.
func mountImage(t *testing.T, img, mnt string) func() {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("cannot attach a loop device: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		exec.Command("losetup", "-d", dev).Run()
		t.Skipf("cannot mount %s: %v: %s", dev, err, out)
	}
	var once sync.Once
	undo := func() {
		once.Do(func() {
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v: %s", mnt, err, out)
			}
			if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
				t.Errorf("losetup -d %s: %v: %s", dev, err, out)
			}
		})
	}
	t.Cleanup(undo)
	return undo
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
