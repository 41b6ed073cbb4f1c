package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/idem-dev/idem/bench"
	"github.com/idem-dev/idem/client"
	"github.com/idem-dev/idem/config"
	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/pairscore"
)

func init() {
	register("bench", command{
		summary: "replay labelled traffic and score it, calibrate thresholds, import public data sets, measure the ANN index",
		run:     runBench,
	})
}

const benchUsage = `usage: idem bench <run|calibrate|import|ann> ...

  idem bench run [flags] DIR
      Replay the traffic set in DIR (traffic.jsonl, tools.json) through the
      funnel in-process on a fresh temporary ledger (or against --server),
      score every decision and the whole-call-embedding baseline, print a
      table and write report.json and report.html (and review.jsonl, the
      borderline pairs, for unlabelled traffic).
        --out DIR               where the reports go (default bench-out/<set>)
        --server URL            replay against a running idem server (tenant from its API key)
        --api-key-env VAR       read the server's API key from environment variable VAR
        --run-id ID             with --server: prefix sessions, workflows and keys with ID
                                (default: a random id, so runs against one server never collide)
        --real-time             replay at the speed of t_ms (default: virtual time)
        --config FILE           an idem config file: its policies, typed comparison and tool rules
        --policies FILE         YAML with a policies: list (default: built-in policies; overrides --config's)
        --budget D              the funnel's time budget (default 50ms)
        --baseline-threshold X  the baseline's cosine threshold (default 0.9)
        --json                  print report.json to stdout instead of the table

  idem bench calibrate [flags] DIR
      Replay DIR, sweep both thresholds per action type, pick per type the
      setting that maximizes recall at the precision target, print the
      policies as a YAML config snippet with the precision and recall they
      are expected to give.
        --holdout DIR2          replay DIR2 with the chosen policies and report them
        --out FILE              write the YAML snippet to FILE (default stdout)
        --target-write P        precision target of write actions (default 0.99)
        --target-read P         precision target of read-only actions (default 0.95)
        --target-replay P       precision a read-only type's free-text matches keep to
                                replay: writes its semantic_replay threshold (default 0.99)
        --scorer                thresholds are the built-in pair scorer's probabilities,
                                not cosines (the sweep and --holdout are scored offline)
        --by-tool               one policy per tool with enough evidence
        --config FILE           an idem config file to start from (policies, typed comparison, tool rules)
        --policies FILE         the policies to start from

  idem bench import FORMAT SRC OUT
      Turn public data into a labelled traffic set in OUT (traffic.jsonl,
      tools.json, README.md). FORMAT is one of:
` + "%s" + `
        --limit N               at most N source records (0: the format's default)
` + benchANNUsage

func runBench(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stdout, benchUsage, importerList())
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "run":
		err = benchRun(ctx, args[1:], stdout, stderr)
	case "calibrate":
		err = benchCalibrate(ctx, args[1:], stdout, stderr)
	case "import":
		err = benchImport(args[1:], stdout)
	case "ann":
		err = benchANN(ctx, args[1:], stdout, stderr)
	default:
		err = benchUsageError{fmt.Sprintf("unknown subcommand %q (run, calibrate, import or ann)", args[0])}
	}
	var ue benchUsageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, benchUsage, importerList())
		return 0
	case errors.As(err, &ue), errors.Is(err, bench.ErrInvalid), errors.Is(err, bench.ErrNoEvents):
		fmt.Fprintf(stderr, "idem bench: %v\n", oneLine(err))
		return 2
	default:
		fmt.Fprintf(stderr, "idem bench: %v\n", oneLine(err))
		return 1
	}
}

func importerList() string {
	var b strings.Builder
	for _, im := range bench.Importers() {
		fmt.Fprintf(&b, "        %-22s  %s\n", im.Name, im.Summary)
	}
	return b.String()
}

// benchUsageError is bad input: exit status 2.
type benchUsageError struct{ msg string }

func (e benchUsageError) Error() string { return e.msg }

// parseInterleaved parses flags that may come before or after the
// positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, benchUsageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

type commonFlags struct {
	confFile  string
	policies  string
	budget    time.Duration
	baseline  float64
	realTime  bool
	server    string
	apiKeyEnv string
	runID     string
	noBar     bool
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	def := bench.DefaultConfig()
	fs.StringVar(&c.confFile, "config", "", "")
	fs.StringVar(&c.policies, "policies", "", "")
	fs.DurationVar(&c.budget, "budget", def.Budget, "")
	fs.Float64Var(&c.baseline, "baseline-threshold", def.BaselineThreshold, "")
	fs.BoolVar(&c.realTime, "real-time", false, "")
	fs.StringVar(&c.server, "server", "", "")
	fs.StringVar(&c.apiKeyEnv, "api-key-env", "", "")
	fs.StringVar(&c.runID, "run-id", "", "")
	fs.BoolVar(&c.noBar, "no-progress", false, "")
}

func (c *commonFlags) config() (bench.Config, error) {
	cfg := bench.DefaultConfig()
	cfg.Budget, cfg.BaselineThreshold, cfg.RealTime = c.budget, c.baseline, c.realTime
	if c.confFile != "" {
		data, err := os.ReadFile(c.confFile)
		if err != nil {
			return cfg, benchUsageError{err.Error()}
		}
		conf, err := config.Load(data, nil)
		if err != nil {
			return cfg, benchUsageError{fmt.Sprintf("%s: %v", c.confFile, err)}
		}
		cfg.Policies, cfg.Canon = conf.Policies, conf.Canon
		if conf.Embedder.Scorer == config.ScorerPair {
			if cfg.Scorer, err = pairscore.Default(); err != nil {
				return cfg, err
			}
		}
	}
	if c.policies != "" {
		data, err := os.ReadFile(c.policies)
		if err != nil {
			return cfg, benchUsageError{err.Error()}
		}
		if cfg.Policies, err = bench.ReadPolicies(data); err != nil {
			return cfg, benchUsageError{err.Error()}
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, benchUsageError{err.Error()}
	}
	return cfg, nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// replayScore reads, replays, analyses and scores one set.
func replayScore(ctx context.Context, dir string, cfg bench.Config, c *commonFlags, enc *embed.USE, stderr io.Writer) (*bench.Report, error) {
	set, err := bench.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if !c.noBar && isTerminal(stderr) {
		bar := progressbar.NewOptions(len(set.Events), progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription(set.Name), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond))
		cfg.Progress = func(done, _ int) { bar.Set(done) }
		defer bar.Finish()
	}
	var run *bench.Run
	var runID string
	if c.server != "" {
		ccfg := client.DefaultConfig(c.server)
		if c.apiKeyEnv != "" {
			ccfg.APIKey = os.Getenv(c.apiKeyEnv)
		}
		sc, err := bench.NewServerChecker(ccfg, c.runID)
		if err != nil {
			return nil, benchUsageError{err.Error()}
		}
		runID = sc.RunID()
		run, err = bench.ReplayWith(ctx, cfg, sc, set)
		if err != nil {
			return nil, err
		}
	} else if run, err = bench.Replay(ctx, cfg, enc, set); err != nil {
		return nil, err
	}
	a, err := bench.Analyze(ctx, enc, run)
	if err != nil {
		return nil, err
	}
	r := bench.Score(a)
	if c.server != "" {
		r.Mode = "server " + c.server + ", run id " + runID
		if cfg.RealTime {
			r.Mode += ", real time"
		}
	}
	return r, nil
}

func benchRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench run", flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	out := fs.String("out", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return benchUsageError{"bench run takes one traffic set folder"}
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	enc, err := embed.NewUSE(embed.DefaultUSEConfig())
	if err != nil {
		return err
	}
	r, err := replayScore(ctx, pos[0], cfg, &c, enc, stderr)
	if err != nil {
		return err
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join("bench-out", r.Set)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := []struct {
		name  string
		write func(io.Writer) error
	}{
		{"report.json", r.WriteJSON},
		{"report.html", r.WriteHTML},
	}
	if !r.Labelled {
		files = append(files, struct {
			name  string
			write func(io.Writer) error
		}{"review.jsonl", r.WriteReview})
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(dir, f.name), f.write); err != nil {
			return err
		}
	}
	if *asJSON {
		return r.WriteJSON(stdout)
	}
	if err := r.WriteText(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s/report.json and %s/report.html", dir, dir)
	if !r.Labelled {
		fmt.Fprintf(stdout, " and %s/review.jsonl (%d borderline pairs)", dir, len(r.Review))
	}
	fmt.Fprintln(stdout)
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func benchCalibrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench calibrate", flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	ccfg := bench.DefaultCalibrateConfig()
	fs.Float64Var(&ccfg.WriteTarget, "target-write", ccfg.WriteTarget, "")
	fs.Float64Var(&ccfg.ReadTarget, "target-read", ccfg.ReadTarget, "")
	fs.Float64Var(&ccfg.ReplayTarget, "target-replay", ccfg.ReplayTarget, "")
	scorer := fs.Bool("scorer", false, "")
	fs.BoolVar(&ccfg.ByTool, "by-tool", false, "")
	holdout := fs.String("holdout", "", "")
	out := fs.String("out", "", "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return benchUsageError{"bench calibrate takes one traffic set folder"}
	}
	if err := ccfg.Validate(); err != nil {
		return benchUsageError{err.Error()}
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	enc, err := embed.NewUSE(embed.DefaultUSEConfig())
	if err != nil {
		return err
	}
	r, err := replayScore(ctx, pos[0], cfg, &c, enc, stderr)
	if err != nil {
		return err
	}
	var model *pairscore.Model
	if *scorer {
		if model, err = pairscore.Default(); err != nil {
			return err
		}
		r.Analysis.UseScorer(model)
		cfg.Scorer = model // the holdout is replayed with the scorer deciding
	}
	cal, err := bench.Calibrate(r.Analysis, ccfg)
	if err != nil {
		return benchUsageError{err.Error()}
	}
	if *holdout != "" {
		hcfg := cfg
		hcfg.Policies = cal.Policies
		hr, err := replayScore(ctx, *holdout, hcfg, &c, enc, stderr)
		if err != nil {
			return err
		}
		cal.SetHoldout(hr)
	}
	if err := cal.WriteText(stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	if *out == "" {
		return cal.WriteYAML(stdout)
	}
	if err := writeFile(*out, cal.WriteYAML); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}

func benchImport(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench import", flag.ContinueOnError)
	limit := fs.Int("limit", 0, "")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return benchUsageError{"bench import takes FORMAT SRC OUT"}
	}
	im, ok := bench.LookupImporter(pos[0])
	if !ok {
		return benchUsageError{fmt.Sprintf("unknown format %q; one of:\n%s", pos[0], importerList())}
	}
	st, err := im.Import(bench.ImportConfig{Src: pos[1], Out: pos[2], Limit: *limit})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d events (%d expected duplicates, %d hard negatives, %d unlabelled) in %d sessions\n",
		pos[2], st.Events, st.Duplicates, st.HardNegatives, st.Unlabelled, st.Sessions)
	return nil
}
