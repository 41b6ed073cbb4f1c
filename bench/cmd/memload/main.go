// Command memload measures what idem serve holds in memory per stored call:
// it reads the server's resident set and Go heap from /metrics when idle,
// makes and completes a number of new calls in a number of sessions over
// the API (each an e-mail to its own recipient whose body is a sentence of
// a text file, so the server embeds it after the claim and keeps its
// vectors in the session's view), waits for the server's background work
// to settle, and reads them again.
//
//	go run ./bench/cmd/memload -server http://127.0.0.1:8080 -texts sts-train.csv
//
// bench/memory.sh starts a server and runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:8080", "idem's base URL")
	texts := flag.String("texts", "", "a text file: one sentence per line, or STS-B's tab-separated rows (columns 6 and 7)")
	sessions := flag.Int("sessions", 1000, "sessions")
	calls := flag.Int("calls", 100, "new calls per session")
	clients := flag.Int("clients", 8, "concurrent clients")
	settle := flag.Duration("settle", 10*time.Second, "how long to wait for the server's background work after the last call")
	drain := flag.Bool("drain", false, "first wait (up to 30 minutes) until the encoder has embedded every claimed call (idem_encoder_queued_texts)")
	flag.Parse()
	if err := run(*server, *texts, *sessions, *calls, *clients, *settle, *drain); err != nil {
		fmt.Fprintln(os.Stderr, "memload:", err)
		os.Exit(1)
	}
}

func run(server, textFile string, sessions, calls, clients int, settle time.Duration, drain bool) error {
	bodies, err := readTexts(textFile)
	if err != nil {
		return err
	}
	idle, err := memory(server)
	if err != nil {
		return err
	}
	fmt.Printf("idle:  rss %s, heap in use %s\n", mib(idle.rss), mib(idle.heap))
	total := sessions * calls
	var next, done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				if err := call(server, i%sessions, i/sessions, bodies[i%len(bodies)]); err != nil {
					errc <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	took := time.Since(start)
	if drain {
		if err := drainQueue(server, 30*time.Minute); err != nil {
			return err
		}
		fmt.Printf("drained: every claimed call embedded %.0f s after the last call\n", time.Since(start.Add(took)).Seconds())
	}
	time.Sleep(settle)
	after, err := memory(server)
	if err != nil {
		return err
	}
	n := done.Load()
	fmt.Printf("after: %d calls in %d sessions (%.0f calls/s): rss %s, heap in use %s\n", n, sessions, float64(n)/took.Seconds(), mib(after.rss), mib(after.heap))
	if after.backlog >= 0 {
		fmt.Printf("encoder backlog when read: %.0f (texts queued, and batches running)\n", after.backlog)
	}
	fmt.Printf("per stored call: rss %.0f B, heap %.0f B\n", float64(after.rss-idle.rss)/float64(n), float64(after.heap-idle.heap)/float64(n))
	return nil
}

// call checks one new call and completes it.
func call(server string, session, step int, body string) error {
	req := map[string]any{
		"session_id": fmt.Sprint("mem-", session), "workflow_id": fmt.Sprint("mem-", session), "step_id": strconv.Itoa(step),
		"tool": "send_email",
		"arguments": map[string]string{
			"to": fmt.Sprintf("user%d.%d@example.com", session, step), "subject": "A note", "body": body,
		},
	}
	var res struct {
		Decision, Key, Token, Reason string
		Notes                        []string
	}
	if err := post(server+"/v1/check", req, &res); err != nil {
		return err
	}
	if res.Decision != "execute" {
		return fmt.Errorf("session %d step %d: %s, want execute (%s; %q)", session, step, res.Decision, res.Reason, res.Notes)
	}
	return post(server+"/v1/complete", map[string]any{"key": res.Key, "token": res.Token, "result": map[string]string{"id": res.Key}}, nil)
}

func post(url string, body, into any) error {
	b, _ := json.Marshal(body)
	for attempt := 1; ; attempt++ {
		resp, err := http.Post(url, "application/json", bytes.NewReader(b))
		if err != nil {
			return err
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode == http.StatusServiceUnavailable && attempt < 5 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, data)
		}
		if into != nil {
			return json.Unmarshal(data, into)
		}
		return nil
	}
}

// mem is what /metrics says of the server's memory, and its encoder
// backlog (texts queued plus batches running, 0 when it is idle; -1 when
// the server does not report it).
type mem struct{ rss, heap, backlog float64 }

// drainQueue waits until the server's encoder has nothing queued or
// running, or fails after limit.
func drainQueue(server string, limit time.Duration) error {
	for end := time.Now().Add(limit); ; {
		m, err := memory(server)
		switch {
		case err != nil:
			return err
		case m.backlog < 0:
			return errors.New("-drain: the server reports no idem_encoder_queued_texts (an older build?)")
		case m.backlog == 0:
			return nil
		case time.Now().After(end):
			return fmt.Errorf("-drain: %.0f texts still queued after %v", m.backlog, limit)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// memory reads the process's resident set and the Go heap in use from
// /metrics.
func memory(server string) (mem, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return mem{}, err
	}
	defer resp.Body.Close()
	m := mem{backlog: -1}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "process_resident_memory_bytes":
			m.rss = v
		case "go_memstats_heap_inuse_bytes":
			m.heap = v
		case `idem_encoder_queued_texts{queue="check"}`, `idem_encoder_queued_texts{queue="background"}`, "idem_encoder_batches_running":
			m.backlog = max(m.backlog, 0) + v
		}
	}
	if m.rss == 0 {
		return m, errors.New("/metrics has no process_resident_memory_bytes")
	}
	return m, sc.Err()
}

func mib(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

// readTexts reads sentences: one per line, or STS-B rows.
func readTexts(path string) ([]string, error) {
	if path == "" {
		return nil, errors.New("-texts: required")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		cand := cols
		if len(cols) >= 7 {
			cand = cols[5:7]
		}
		for _, s := range cand {
			if s = strings.TrimSpace(s); s != "" && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no texts", path)
	}
	return out, sc.Err()
}
