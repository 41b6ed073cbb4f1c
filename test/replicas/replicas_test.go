// Package replicas runs three `idem serve` processes on one PostgreSQL
// ledger and checks that they behave as one idem: one execute per key,
// waiters on every replica woken by a completion on any, duplicates
// caught across replicas (also when two replicas are asked for them at
// the same instant), and nothing acknowledged lost when a replica is
// killed.
//
// It needs a database (scripts/with-postgres sets IDEM_TEST_POSTGRES_DSN;
// each replica's config says store.backend: postgres); without one it skips
// and says why.
package replicas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/ledger/postgres/pgtest"
)

// lease is the replicas' ledger lease: short, so a killed replica's
// claims turn uncertain within the test.
const lease = 4 * time.Second

type replica struct {
	name string
	url  string
	cmd  *exec.Cmd
	// exited is closed once the process has exited (and cmd.Wait returned).
	exited chan struct{}
	log    *syncBuffer
	c      *client.Client
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestReplicas(t *testing.T) {
	dsn := pgtest.DSN(t)
	if testing.Short() {
		t.Skip("builds idem and runs three replicas")
	}
	dir := t.TempDir()
	bin := buildIdem(t, dir)
	schema := pgtest.Schema(t, dsn, "replicas_")
	var rs []*replica
	for i := range 3 {
		rs = append(rs, startReplica(t, bin, dir, dsn, schema, i))
	}
	ctx := t.Context()

	t.Run("OneExecutePerKey", func(t *testing.T) { raceAndWait(ctx, t, rs) })
	t.Run("DuplicateAcrossReplicas", func(t *testing.T) { duplicates(ctx, t, rs) })
	t.Run("TwinsRacingAcrossReplicas", func(t *testing.T) { twins(ctx, t, rs) })
	t.Run("KilledReplica", func(t *testing.T) { killed(ctx, t, rs) })
}

// raceAndWait: 300 clients spread over the replicas race on 50 keys:
// exactly 50 executes, every other answer in_progress or duplicate. Then
// every loser waits on its replica while the winners complete on theirs;
// each waiter gets the result, within 100 ms of the completion (p99).
func raceAndWait(ctx context.Context, t *testing.T, rs []*replica) {
	const clients, nkeys = 300, 50
	req := func(k int) client.CheckRequest {
		return client.CheckRequest{
			SessionID: fmt.Sprint("race-", k), WorkflowID: "race", StepID: fmt.Sprint("step-", k), Tool: "charge_card",
			Arguments: json.RawMessage(fmt.Sprintf(`{"order_id":"ord-%d","amount":"%d.00","currency":"EUR"}`, k, 10+k)),
		}
	}
	answers := make([]*client.Result, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			<-start
			res, err := rs[i%len(rs)].c.Check(ctx, req(i%nkeys))
			if err != nil {
				t.Errorf("client %d: check: %v", i, err)
				return
			}
			answers[i] = res
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	winner := make([]int, nkeys) // client index + 1
	for i, a := range answers {
		k := i % nkeys
		switch a.Decision {
		case client.Execute:
			if winner[k] != 0 {
				t.Fatalf("key %d executed by clients %d and %d", k, winner[k]-1, i)
			}
			winner[k] = i + 1
		case client.InProgress, client.Duplicate:
		default:
			t.Fatalf("client %d: decision %q (stage %s), want execute, in_progress or duplicate", i, a.Decision, a.Stage)
		}
	}
	for k, w := range winner {
		if w == 0 {
			t.Fatalf("key %d: no execute", k)
		}
	}

	type woken struct {
		at  time.Time
		res *client.Result
		err error
	}
	wakes := make([]woken, clients)
	var waiting sync.WaitGroup
	for i := range clients {
		if winner[i%nkeys] == i+1 {
			continue
		}
		waiting.Go(func() {
			r := req(i % nkeys)
			r.WaitMS = 20_000
			res, err := rs[i%len(rs)].c.Check(ctx, r)
			wakes[i] = woken{time.Now(), res, err}
		})
	}
	time.Sleep(time.Second) // let every waiter reach its replica's Wait
	completed := make([]time.Time, nkeys)
	for k, w := range winner {
		a := answers[w-1]
		if _, err := rs[(w-1)%len(rs)].c.Complete(ctx, a.Key, a.Token, json.RawMessage(fmt.Sprintf(`{"charge":"ch-%d"}`, k))); err != nil {
			t.Fatalf("complete key %d: %v", k, err)
		}
		completed[k] = time.Now()
	}
	waiting.Wait()
	var lat []time.Duration
	for i, w := range wakes {
		k := i % nkeys
		if winner[k] == i+1 {
			continue
		}
		if w.err != nil || w.res.Decision != client.Duplicate || w.res.Match == nil ||
			string(w.res.Match.Result) != fmt.Sprintf(`{"charge":"ch-%d"}`, k) {
			t.Fatalf("waiter %d on key %d: %+v, %v; want duplicate with the result", i, k, w.res, w.err)
		}
		lat = append(lat, max(0, w.at.Sub(completed[k])))
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	t.Logf("%d waiters over 3 replicas: woken after the completion in p50 %v, p99 %v, max %v", len(lat), p(0.5), p(0.99), lat[len(lat)-1])
	// The wake-up time is measured and reported (README), not held to a
	// wall-clock target here: the machines are shared. Only a p99 of a
	// second or more fails the test: then waiters are woken by the
	// replicas' periodic re-check (every 2 s), not by notifications.
	if p(0.99) >= time.Second {
		t.Errorf("p99 wake-up %v: waiters on other replicas are not woken by notifications", p(0.99))
	}
}

// duplicates: a call claimed and completed on replica 0 is caught on
// replicas 1 and 2 under a new step id, word for word (exact stage) and
// reworded (semantic stage).
func duplicates(ctx context.Context, t *testing.T, rs []*replica) {
	first := client.CheckRequest{
		SessionID: "dup", WorkflowID: "dup", StepID: "s1", Tool: "send_email",
		Arguments: json.RawMessage(`{"to":"ops@example.com","subject":"Quarterly report","body":"Please find attached the quarterly report for Q3."}`),
	}
	res, err := rs[0].c.Check(ctx, first)
	if err != nil || res.Decision != client.Execute {
		t.Fatalf("first call on replica 0: %+v, %v", res, err)
	}
	if _, err := rs[0].c.Complete(ctx, res.Key, res.Token, json.RawMessage(`{"message_id":"m-1"}`)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, args string
		on         int
	}{
		{"exact", `{"to":"ops@example.com","subject":"Quarterly report","body":"Please find attached the quarterly report for Q3."}`, 1},
		{"reworded", `{"to":"ops@example.com","subject":"Quarterly report","body":"Please find the quarterly report for Q3 attached."}`, 2},
	} {
		r := first
		r.StepID, r.Arguments = "s-"+tc.name, json.RawMessage(tc.args)
		got, err := rs[tc.on].c.Check(ctx, r)
		if err != nil {
			t.Fatalf("%s on replica %d: %v", tc.name, tc.on, err)
		}
		if got.Decision == client.Execute || got.Match == nil || got.Match.Key != res.Key {
			t.Errorf("%s duplicate on replica %d: decision %s stage %s match %+v; want it matched to %s", tc.name, tc.on, got.Decision, got.Stage, got.Match, res.Key)
		}
		t.Logf("%s duplicate on replica %d: decision %s by stage %s", tc.name, tc.on, got.Decision, got.Stage)
	}
}

// twins: two replicas are asked at the same instant for the same effect
// under different step ids in one session, word for word or reworded:
// exactly one of them executes, round after round (the session fence).
func twins(ctx context.Context, t *testing.T, rs []*replica) {
	const rounds = 20
	args := [2]string{
		`{"to":"ann@example.com","subject":"Your invoice for May","body":"Hi Ann, your invoice for May is attached. Best, Bob"}`,
		`{"to":"ann@example.com","subject":"May invoice","body":"Hi Ann, attached is your May invoice. Best regards, Bob"}`,
	}
	for round := range rounds {
		session := fmt.Sprint("twins-", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			answers [2]*client.Result
			errs    [2]error
		)
		for i := range 2 {
			a := args[i]
			if round%2 == 0 {
				a = args[0] // word for word
			}
			wg.Go(func() {
				<-start
				answers[i], errs[i] = rs[(round+i)%len(rs)].c.Check(ctx, client.CheckRequest{
					SessionID: session, WorkflowID: session, StepID: fmt.Sprint("step-", i), Tool: "send_email",
					Arguments: json.RawMessage(a),
				})
			})
		}
		close(start)
		wg.Wait()
		executes := 0
		for i, a := range answers {
			if errs[i] != nil {
				t.Fatalf("round %d, call %d: %v", round, i, errs[i])
			}
			if a.Decision == client.Execute {
				executes++
			}
		}
		if executes != 1 {
			t.Fatalf("round %d: decisions %s (%s) and %s (%s): want exactly one execute", round,
				answers[0].Decision, answers[0].Stage, answers[1].Decision, answers[1].Stage)
		}
	}
}

// killed: replica 2 claims 10 calls and completes 5, then is SIGKILLed.
// On replica 0 the 5 completions replay their results; the 5 claims are
// in progress until their lease ends, then uncertain.
func killed(ctx context.Context, t *testing.T, rs []*replica) {
	victim := rs[2]
	type claim struct {
		req  client.CheckRequest
		res  *client.Result
		done bool
	}
	var claims []claim
	for i := range 10 {
		r := client.CheckRequest{SessionID: "kill", WorkflowID: "kill", StepID: fmt.Sprint("s", i), Tool: "charge_card",
			Arguments: json.RawMessage(fmt.Sprintf(`{"order_id":"kill-%d","amount":"1.00"}`, i))}
		res, err := victim.c.Check(ctx, r)
		if err != nil || res.Decision != client.Execute {
			t.Fatalf("claim %d on replica 2: %+v %v", i, res, err)
		}
		c := claim{req: r, res: res}
		if i%2 == 0 {
			if _, err := victim.c.Complete(ctx, res.Key, res.Token, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))); err != nil {
				t.Fatal(err)
			}
			c.done = true
		}
		claims = append(claims, c)
	}
	claimedAt := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	for i, c := range claims {
		got, err := rs[0].c.Check(ctx, c.req)
		if err != nil {
			t.Fatal(err)
		}
		want := client.InProgress
		if c.done {
			want = client.Duplicate
		}
		if got.Decision != want {
			t.Fatalf("after the kill, call %d on replica 0: %s, want %s", i, got.Decision, want)
		}
	}
	time.Sleep(time.Until(claimedAt.Add(lease + 500*time.Millisecond)))
	for i, c := range claims {
		got, err := rs[1].c.Check(ctx, c.req)
		if err != nil {
			t.Fatal(err)
		}
		want := client.Uncertain
		if c.done {
			want = client.Duplicate
		}
		if got.Decision != want {
			t.Fatalf("after the lease, call %d on replica 1: %s, want %s", i, got.Decision, want)
		}
	}
}

// buildIdem builds cmd/idem into dir.
func buildIdem(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	bin := filepath.Join(dir, "idem")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/idem-dev/idem/cmd/idem").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/idem: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// replicaConfig is replica i's config file: the shared PostgreSQL store,
// a short lease, its own listen address.
func replicaConfig(addr, dataDir, dsn, schema string) string {
	return fmt.Sprintf(`listen: %q
data_dir: %q
log:
  level: warn
max_wait: 30s
budget: 10m # no machine runs out of it: the decisions asserted must not depend on speed
ledger:
  lease: %s
store:
  backend: postgres
postgres:
  dsn: %q
  schema: %q
  pool_size: 8
  statement_timeout: 5s
`, addr, dataDir, lease, dsn, schema)
}

// startReplica starts replica i and waits until it is ready; it is
// stopped (SIGTERM, then SIGKILL) when the test ends.
func startReplica(t *testing.T, bin, dir, dsn, schema string, i int) *replica {
	t.Helper()
	addr := freePort(t)
	cfgFile := filepath.Join(dir, fmt.Sprintf("replica-%d.yaml", i))
	if err := os.WriteFile(cfgFile, []byte(replicaConfig(addr, filepath.Join(dir, fmt.Sprint("data-", i)), dsn, schema)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: fmt.Sprint("replica-", i), url: "http://" + addr, log: &syncBuffer{}}
	r.cmd = exec.Command(bin, "serve", "--config", cfgFile)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.exited = make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(r.exited) }() // the only Wait
	t.Cleanup(func() {
		select {
		case <-r.exited:
		default:
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.exited:
			case <-time.After(10 * time.Second):
				_ = r.cmd.Process.Kill()
				<-r.exited
			}
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", r.name, r.log.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-r.exited:
			err := r.cmd.ProcessState
			out := r.log.String()
			t.Fatalf("%s exited before it was ready (%v):\n%s", r.name, err, out)
		default:
		}
		resp, err := http.Get(r.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 60 s:\n%s", r.name, r.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cc := client.DefaultConfig(r.url)
	c, err := client.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}
