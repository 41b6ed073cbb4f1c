package load

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestReadReply(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string
		err      error
	}{
		{"simple string", "+OK\r\n", "OK", nil},
		{"integer", ":42\r\n", "42", nil},
		{"bulk", "$5\r\nS{\"a\"\r\n", `S{"a"`, nil},
		{"empty bulk", "$0\r\n\r\n", "", nil},
		{"null", "$-1\r\n", "", errNil},
	} {
		got, err := readReply(bufio.NewReader(strings.NewReader(tc.in)))
		if !errors.Is(err, tc.err) || (err == nil && string(got) != tc.want) {
			t.Errorf("%s: %q %v, want %q %v", tc.name, got, err, tc.want, tc.err)
		}
	}
	for _, bad := range []string{"-ERR wrong type\r\n", "$3\r\nab", "$x\r\n", "*1\r\n", "+OK\n", "", "$-2\r\n", "$3\r\nabcd\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("reply %q read without an error", bad)
		}
	}
	if _, err := readReply(bufio.NewReader(strings.NewReader("-ERR x\r\n"))); !isRedisError(err) {
		t.Errorf("an error reply is not a Redis error: %v", err)
	}
}

func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "$3\r\nabc\r\n", "$-1\r\n", "-ERR x\r\n", ":1\r\n", "$99999999999\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := readReply(bufio.NewReader(strings.NewReader(string(b))))
		if err == nil && len(v) > len(b) {
			t.Fatalf("a reply of %d bytes from %d bytes of input", len(v), len(b))
		}
	})
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		field  string
	}{
		{"no URL", func(c *Config) { c.URL = "" }, "URL"},
		{"workload", func(c *Config) { c.Workload = "reads" }, "Workload"},
		{"clients", func(c *Config) { c.Clients = 0 }, "Clients"},
		{"duration", func(c *Config) { c.Duration = 0 }, "Duration"},
		{"rate", func(c *Config) { c.Rate = -1 }, "Rate"},
		{"session calls", func(c *Config) { c.SessionCalls = 0 }, "SessionCalls"},
		{"prefix", func(c *Config) { c.Prefix = "" }, "Prefix"},
	} {
		c := DefaultConfig("http://127.0.0.1:1")
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.field)
		}
	}
}

// TestRunStopsAtAWrongAnswer: a server that answers duplicate to a new
// call ends the run with an error saying so, rather than a throughput of
// wrong answers.
func TestRunStopsAtAWrongAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"decision": "duplicate", "stage": "exact", "key": "k"})
	}))
	defer srv.Close()
	cfg := DefaultConfig(srv.URL)
	cfg.Clients, cfg.Warmup, cfg.Duration = 2, 0, time.Second
	_, err := Run(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), `decision "duplicate"`) {
		t.Fatalf("run against a server answering duplicate: %v", err)
	}
}

// TestAnchorOnRedis runs both workloads against the anchor on a real
// redis-server (appendfsync always), when one is installed: every pair is
// a claim that Redis granted and a completion it stored, and every key hit
// finds the completion.
func TestAnchorOnRedis(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed (apt-get install -y --no-install-recommends redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--logfile", filepath.Join(dir, "log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var a *Anchor
	for deadline := time.Now().Add(10 * time.Second); ; {
		if a, err = NewAnchor(addr, 4); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()

	ctx := t.Context()
	for _, w := range []Workload{NewCalls, KeyHits} {
		cfg := DefaultConfig(srv.URL)
		cfg.Workload, cfg.Clients, cfg.Warmup, cfg.Duration, cfg.Prefix = w, 2, 0, 300*time.Millisecond, "t-"+string(w)
		res, err := Run(ctx, cfg)
		if err != nil || res.Ops == 0 {
			t.Fatalf("%s: %+v %v", w, res, err)
		}
	}
	// A key hit reads back the completion the anchor stored.
	rc, err := dialRedis(addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.close()
	v, err := rc.do([]byte("GET"), []byte("t-keyhit-c0-w1:0:charge_card"))
	if err != nil || len(v) == 0 || v[0] != successMark || !json.Valid(v[1:]) {
		t.Fatalf("the seeded call in Redis: %q %v", v, err)
	}
	if _, err := Run(context.Background(), Config{}); err == nil {
		t.Error("Run with an empty config ran")
	}
}
