// Command load is the load benchmark's driver (bench/load/run starts the
// servers and calls it):
//
//	load anchor -listen 127.0.0.1:PORT -redis 127.0.0.1:PORT
//	load run -url URL [-workload new|keyhit] [-clients 8] [-rate 0] [-duration 5s]
//	load compare -target idem=URL -target redis=URL [-clients 1,8,32] [-rounds 5]
//	load port
//	load wait -url URL [-timeout 30s]
//
// anchor serves the Redis-backed check (package load's Anchor) until
// SIGINT or SIGTERM; run measures one load and prints its result as JSON;
// compare runs every measurement in interleaved rounds and prints the
// medians as Markdown tables; port prints a free loopback port; wait
// returns once URL answers HTTP at all.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idem-dev/idem/bench/load"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: load anchor|run|compare [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "anchor":
		err = anchor(ctx, os.Args[2:])
	case "run":
		err = run(ctx, os.Args[2:])
	case "compare":
		err = compare(ctx, os.Args[2:])
	case "port":
		err = port()
	case "wait":
		err = wait(ctx, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (anchor, run, compare, port or wait)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func anchor(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("anchor", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve the check on")
	redis := fs.String("redis", "127.0.0.1:6379", "Redis address")
	conns := fs.Int("conns", 64, "idle Redis connections kept")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a, err := load.NewAnchor(*redis, *conns)
	if err != nil {
		return err
	}
	defer a.Close()
	return load.ServeAnchor(ctx, a, *listen)
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfg := load.DefaultConfig("")
	fs.StringVar(&cfg.URL, "url", "", "server root, e.g. http://127.0.0.1:8080")
	workload := fs.String("workload", string(cfg.Workload), "new (check + complete of new calls) or keyhit")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "concurrent clients, each with its own session")
	fs.Float64Var(&cfg.Rate, "rate", 0, "operations per second in all (0: as fast as answered)")
	fs.IntVar(&cfg.SessionCalls, "session-calls", cfg.SessionCalls, "new calls per session before a client starts the next")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured time first")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time")
	fs.StringVar(&cfg.Prefix, "prefix", fmt.Sprint("load-", time.Now().UnixNano()), "session and workflow prefix (fresh per run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Workload = load.Workload(*workload)
	res, err := load.Run(ctx, cfg)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// targets is a repeated -target name=URL flag.
type targets []load.Target

func (t *targets) String() string { return fmt.Sprint(*t) }
func (t *targets) Set(v string) error {
	name, url, ok := strings.Cut(v, "=")
	if !ok || name == "" || url == "" {
		return errors.New("want name=URL")
	}
	*t = append(*t, load.Target{Name: name, URL: url})
	return nil
}

func compare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	cfg := load.DefaultCompareConfig()
	var ts targets
	fs.Var(&ts, "target", "name=URL of a server under load, repeated; the first is compared with the others")
	clients := fs.String("clients", "1,8,32", "numbers of clients of new calls")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "interleaved rounds")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured time before each measurement")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time of each measurement")
	fs.IntVar(&cfg.KeyHitClients, "keyhit-clients", cfg.KeyHitClients, "clients of key hits (0: skip key hits)")
	fs.IntVar(&cfg.WriteClients, "write-clients", cfg.WriteClients, "clients of the write load beside key hits")
	fs.Float64Var(&cfg.WriteRate, "write-rate", cfg.WriteRate, "pairs/s of the write load beside key hits")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Targets = ts
	cfg.Clients = nil
	for f := range strings.SplitSeq(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-clients %q: %w", *clients, err)
		}
		cfg.Clients = append(cfg.Clients, n)
	}
	cfg.Progress = os.Stderr
	rep, err := load.Compare(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Markdown(os.Stdout)
	return nil
}

// port prints a loopback port free at the moment of asking.
func port() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	return nil
}

// wait polls url until it answers HTTP (any status) or the timeout ends.
func wait(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wait", flag.ContinueOnError)
	url := fs.String("url", "", "URL to poll")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer in %v", *url, *timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
