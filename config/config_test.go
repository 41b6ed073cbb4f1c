package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/canon"
	"github.com/idem-dev/idem/funnel"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestDefaultsNeedNoFile(t *testing.T) {
	for _, data := range []string{"", "\n", "# only a comment\n", "---\n"} {
		cfg, err := Load([]byte(data), nil)
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if !reflect.DeepEqual(cfg, Default()) {
			t.Errorf("%q: not the defaults", data)
		}
	}
	d := Default()
	if d.Listen != "127.0.0.1:8080" || d.DataDir != "./idem-data" || d.Embedder.Provider != "builtin" ||
		d.Judge.Enabled || !d.Store.SyncWrites || d.Budget != 50*time.Millisecond {
		t.Errorf("defaults: %+v", d)
	}
}

// TestExampleConfig: the committed idem.example.yaml is valid and says
// what the defaults are (plus the extra policy and tool rule it shows).
func TestExampleConfig(t *testing.T) {
	data, err := os.ReadFile("../idem.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := Default()
	if cfg.Listen != d.Listen || cfg.Store != d.Store || cfg.Ledger != d.Ledger || cfg.Limits != d.Limits || cfg.Budget != d.Budget || cfg.Sessions != d.Sessions {
		t.Errorf("the example's values drifted from the defaults:\n%+v", cfg)
	}
	if len(cfg.Policies) != 3 || cfg.Policies[0].Name != "email" || cfg.Policies[0].DuplicateThreshold != 0.9 || cfg.Policies[0].Lease != time.Minute {
		t.Errorf("policies: %+v", cfg.Policies)
	}
	if !reflect.DeepEqual(cfg.Policies[1:], funnel.DefaultPolicies()) {
		t.Errorf("the example's last two policies are not the defaults")
	}
	if r := cfg.Tools.Rules["send_email"]; r.Fields["to"].Class != "identity" || !r.Fields["to"].Normalize.FoldCase {
		t.Errorf("tool rules: %+v", r)
	}
}

// TestErrorsNameKeyAndLine: every kind of mistake names the key and line.
func TestErrorsNameKeyAndLine(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string // substrings of the error, one per expected problem
	}{
		{"unknown key", "listen: 127.0.0.1:1\nstore:\n  sync_write: true\n", []string{"line 3: store.sync_write: unknown field"}},
		{"wrong type", "store:\n  sync_writes: maybe\n", []string{"line 2: store.sync_writes:", "boolean"}},
		{"bad duration", "budget: fast\n", []string{"line 1: budget:"}},
		{"duplicate key", "listen: a:1\nlisten: b:2\n", []string{"line 2: listen:", "already defined"}},
		{"syntax", "store: [\n", []string{"line 1"}},
		{"not a mapping", "- 1\n- 2\n", []string{"line 1", "mapping"}},
		{"public without keys", "listen: 0.0.0.0:8080\n", []string{"line 1: listen:", "loopback"}},
		{"bad provider", "embedder:\n  provider: opneai\n", []string{"line 2: embedder.provider:", "opneai"}},
		{"unknown kernel", "embedder:\n  kernel: mmx\n", []string{"line 2: embedder.kernel:", "mmx"}},
		{"openai without model", "embedder:\n  provider: openai\n  base_url: http://x/v1\n  dimensions: 8\n", []string{"embedder.model: required"}},
		{"judge without model", "judge:\n  enabled: true\n", []string{"line 1: judge.model"}},
		{"bad key hash", "auth:\n  keys:\n    - {tenant: a, sha256: abc}\n", []string{"line 3: auth.keys[0].sha256"}},
		{"bad class", "tools:\n  rules:\n    t:\n      fields:\n        a: {class: bogus}\n", []string{"tools.rules.t.fields.a.class", "bogus", "line 5"}},
		{"bad policy", "policies:\n  - name: a\n  - name: b\n    on_duplicate: nope\n", []string{"line 3: policies[1]", "on_duplicate"}},
		{"policy twice", "policies:\n  - name: a\n  - name: a\n", []string{"line 3: policies[1].name", "twice"}},
		{"two problems", "budget: -1s\nmax_wait: -1s\n", []string{"line 1: budget", "line 2: max_wait"}},
		{"alias", "budget: &b 1s\nmax_wait: *b\n", []string{"line 2", "aliases"}},
		{"limits", "limits:\n  canon:\n    max_depth: 20000\n", []string{"line 3: limits.canon.max_depth"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.yaml), nil)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not match ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestEnvOverrides(t *testing.T) {
	cfg, err := Load([]byte("listen: 127.0.0.1:1\nstore:\n  sync_writes: true\n"), env(map[string]string{
		"IDEM_LISTEN": "127.0.0.1:9999", "IDEM_DATA_DIR": "/var/lib/idem", "IDEM_STORE_SYNC_WRITES": "false",
		"IDEM_BUDGET": "80ms", "IDEM_LIMITS_CANON_MAX_DEPTH": "64", "IDEM_JUDGE_MODEL": "gpt-4o-mini",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9999" || cfg.DataDir != "/var/lib/idem" || cfg.Store.SyncWrites ||
		cfg.Budget != 80*time.Millisecond || cfg.Limits.Canon.MaxDepth != 64 || cfg.Judge.Model != "gpt-4o-mini" {
		t.Errorf("%+v", cfg)
	}
	_, err = Load(nil, env(map[string]string{"IDEM_BUDGET": "soon"}))
	if err == nil || !strings.Contains(err.Error(), "budget (from IDEM_BUDGET)") {
		t.Errorf("bad env value: %v", err)
	}
	_, err = Load(nil, env(map[string]string{"IDEM_LISTEN": "0.0.0.0:80"}))
	if err == nil || !strings.Contains(err.Error(), "listen (from IDEM_LISTEN)") {
		t.Errorf("invalid env value: %v", err)
	}
	names := map[string]bool{}
	for _, v := range EnvVars() {
		names[v.Name] = true
	}
	for _, n := range []string{"IDEM_LISTEN", "IDEM_DATA_DIR", "IDEM_EMBEDDER_PROVIDER", "IDEM_JUDGE_ENABLED", "IDEM_MAX_WAIT"} {
		if !names[n] {
			t.Errorf("EnvVars lacks %s", n)
		}
	}
}

func TestPolicyDefaultsFilled(t *testing.T) {
	cfg, err := Load([]byte("policies:\n  - name: pay\n    tools: [charge_*]\n    strict: true\n    duplicate_threshold: 0.95\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policies[0]
	want := funnel.DefaultPolicy()
	want.Name, want.Tools, want.Strict, want.DuplicateThreshold = "pay", []string{"charge_*"}, true, 0.95
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got %+v\nwant %+v", p, want)
	}
	// A policy of read-only tools takes the read-only default's values:
	// it replays a duplicate and executes when a candidate was not compared.
	cfg, err = Load([]byte("policies:\n  - name: lookups\n    read_only: true\n  - name: default\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Policies[0]; r.OnDuplicate != funnel.ActionReplay || r.Uncompared != funnel.FallbackExecute {
		t.Errorf("read-only policy filled with on_duplicate %q, uncompared %q; want replay, execute", r.OnDuplicate, r.Uncompared)
	}
	if w := cfg.Policies[1]; w.OnDuplicate != funnel.ActionConfirm || w.Uncompared != funnel.FallbackConfirm {
		t.Errorf("default policy filled with on_duplicate %q, uncompared %q; want confirm, confirm", w.OnDuplicate, w.Uncompared)
	}
}

// TestMarshalRoundTrip: the effective config check prints loads back to
// the same config.
func TestMarshalRoundTrip(t *testing.T) {
	data, err := os.ReadFile("../idem.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(out, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out2, _ := Marshal(again); string(out2) != string(out) {
		t.Errorf("round trip changed the config:\n%s\n---\n%s", out, out2)
	}
}

// FuzzLoad: Load never panics; what it rejects matches ErrInvalid; what
// it accepts prints and loads back unchanged.
func FuzzLoad(f *testing.F) {
	if data, err := os.ReadFile("../idem.example.yaml"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{"", "listen: 127.0.0.1:1\n", "store: {sync_writes: false}\n", "policies:\n  - name: a\n",
		"budget: 1ms\nmax_wait: 0s\n", "- 1\n", "a: &x 1\nb: *x\n", "auth: {keys: [{tenant: t, sha256: " + strings.Repeat("a", 64) + "}]}\nlisten: 0.0.0.0:1\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Load(data, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			return
		}
		out, err := Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := Load(out, nil)
		if err != nil {
			t.Fatalf("reloading the effective config: %v\n%s", err, out)
		}
		if out2, _ := Marshal(again); string(out2) != string(out) {
			t.Fatalf("round trip changed the config:\n%s\n---\n%s", out, out2)
		}
	})
}

// TestTypedSettingsReachCanon: the typed comparison settings of the file
// (top level, per tool, per field) decide how identity values compare.
func TestTypedSettingsReachCanon(t *testing.T) {
	cfg, err := Load([]byte(`
typed:
  currency: USD
  timezone: Asia/Tokyo
tools:
  rules:
    book_table:
      typed: {year: ignore, zone: ignore}
      fields:
        city: {aliases: {SF: San Francisco}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	cn, err := canon.New(cfg.Canon(nil))
	if err != nil {
		t.Fatal(err)
	}
	digest := func(tool, args string) uint64 {
		c, err := cn.Canonicalize(tool, []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return c.IdentityDigest
	}
	if digest("book_table", `{"date":"2019-03-14","time":"19:30","city":"San Francisco"}`) !=
		digest("book_table", `{"date":"March 14th","time":"evening 7:30","city":"SF"}`) {
		t.Error("year: ignore, the city alias or the typed time did not reach the canonicalizer")
	}
	if digest("pay", `{"amount":"$1,250.00"}`) != digest("pay", `{"amount":"1250 USD"}`) {
		t.Error("the top-level currency did not reach the canonicalizer")
	}
	if digest("book_table", `{"date":"2019-03-14","time":"19:30"}`) == digest("book_table", `{"date":"2019-03-14","time":"20:30"}`) {
		t.Error("a different time compared equal")
	}
	if _, err := Load([]byte("typed:\n  year: sometimes\n"), nil); err == nil || !strings.Contains(err.Error(), "typed") {
		t.Errorf("a bad typed setting: %v", err)
	}
	// 20:00 UTC on March 1st is March 2nd in Tokyo; book_table's own
	// typed settings name no zone.
	now := time.Date(2019, 3, 1, 20, 0, 0, 0, time.UTC)
	if got := cn.Today("pay", now); got != (canon.Date{Year: 2019, Month: time.March, Day: 2}) {
		t.Errorf("typed.timezone Asia/Tokyo: today %v, want 2019-03-02", got)
	}
	if got := cn.Today("book_table", now); !got.IsZero() {
		t.Errorf("a tool whose typed settings name no zone: today %v", got)
	}
	if _, err := Load([]byte("typed:\n  timezone: Moon/Tranquility\n"), nil); err == nil || !strings.Contains(err.Error(), "typed.timezone") {
		t.Errorf("a bad timezone: %v", err)
	}
}

// TestReadingsOffReachCanon: typed.readings_off, top level and per tool,
// decides which readings grade values restated.
func TestReadingsOffReachCanon(t *testing.T) {
	cfg, err := Load([]byte(`
typed:
  readings_off: [abbreviation]
tools:
  rules:
    strict_tool:
      typed: {readings_off: [all]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	cn, err := canon.New(cfg.Canon(nil))
	if err != nil {
		t.Fatal(err)
	}
	grade := func(tool, a, b string) canon.Grade {
		x, err := cn.Canonicalize(tool, []byte(a))
		if err != nil {
			t.Fatal(err)
		}
		y, err := cn.Canonicalize(tool, []byte(b))
		if err != nil {
			t.Fatal(err)
		}
		return canon.Compare(x, y, canon.Date{}).Overall
	}
	if g := grade("book", `{"city":"Seattle, WA"}`, `{"city":"Seattle"}`); g != canon.Restated {
		t.Errorf("qualifier, still on: %v", g)
	}
	if g := grade("book", `{"city":"San Fran"}`, `{"city":"San Francisco"}`); g != canon.Different {
		t.Errorf("abbreviation, switched off: %v", g)
	}
	if g := grade("strict_tool", `{"city":"Seattle, WA"}`, `{"city":"Seattle"}`); g != canon.Different {
		t.Errorf("a tool with every reading off: %v", g)
	}
	if _, err := Load([]byte("typed:\n  readings_off: [shortening]\n"), nil); err == nil || !strings.Contains(err.Error(), "readings_off[0]") {
		t.Errorf("an unknown reading: %v", err)
	}
}

// durationKeys lists the path of every duration key of t ("budget",
// "store.gc_interval", "policies[0].lease"), found by reflection so that a
// key added later is covered.
func durationKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		ft := t.Field(i).Type
		p := prefix + name
		switch {
		case ft == durationType:
			out = append(out, p)
		case ft.Kind() == reflect.Struct:
			out = append(out, durationKeys(ft, p+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, durationKeys(ft.Elem(), p+"[0].")...)
		}
	}
	return out
}

// yamlAt is a file setting the key at path (as durationKeys spells it) to
// value, the key on the file's last line.
func yamlAt(path, value string) string {
	var b strings.Builder
	indent := ""
	parts := strings.Split(path, ".")
	for i, p := range parts {
		name, item := strings.CutSuffix(p, "[0]")
		if i == len(parts)-1 {
			fmt.Fprintf(&b, "%s%s: %s\n", indent, name, value)
			break
		}
		fmt.Fprintf(&b, "%s%s:\n", indent, name)
		indent += "  "
		if item {
			b.WriteString(indent + "-\n")
			indent += "  "
		}
	}
	return b.String()
}

// TestDurationErrorsNameKeyAndLine: a bad value for any duration key
// ("50xs", a unit missing or misspelt) is reported with its key, its line
// and the value, never as a bare "time: unknown unit".
func TestDurationErrorsNameKeyAndLine(t *testing.T) {
	keys := durationKeys(reflect.TypeFor[Config](), "")
	for _, want := range []string{"budget", "max_wait", "store.gc_interval", "ledger.lease", "postgres.statement_timeout", "embedder.timeout", "judge.timeout", "policies[0].lease", "policies[0].window"} {
		if !slices.Contains(keys, want) {
			t.Fatalf("durationKeys found %v, not %s", keys, want)
		}
	}
	for _, key := range keys {
		for _, value := range []string{"50xs", `"5q"`, "1d", "fast", "!!str 10 s"} {
			t.Run(key+"="+value, func(t *testing.T) {
				data := yamlAt(key, value)
				_, err := Load([]byte(data), nil)
				line := strings.Count(data, "\n")
				want := fmt.Sprintf("line %d: %s: ", line, key)
				if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "is not a duration") {
					t.Errorf("Load(%q) = %v, want an error containing %q and \"is not a duration\"", data, err, want)
				}
			})
		}
	}
	// Good values still load.
	cfg, err := Load([]byte(yamlAt("store.gc_interval", "90s")+"budget: 1h30m\n"), nil)
	if err != nil || cfg.Store.GCInterval != 90*time.Second || cfg.Budget != 90*time.Minute {
		t.Errorf("good durations: %v, gc_interval %v, budget %v", err, cfg.Store.GCInterval, cfg.Budget)
	}
}

// TestSyncDelay: store.sync_delay loads from the file and the environment,
// and a value outside [0, 100ms] is refused naming the key.
func TestSyncDelay(t *testing.T) {
	cfg, err := Load([]byte(yamlAt("store.sync_delay", "2ms")), nil)
	if err != nil || cfg.Store.SyncDelay != 2*time.Millisecond {
		t.Fatalf("sync_delay 2ms: %v, %v", cfg.Store.SyncDelay, err)
	}
	env := func(k string) (string, bool) { return "500us", k == "IDEM_STORE_SYNC_DELAY" }
	if cfg, err := Load(nil, env); err != nil || cfg.Store.SyncDelay != 500*time.Microsecond {
		t.Errorf("IDEM_STORE_SYNC_DELAY=500us: %v, %v", cfg.Store.SyncDelay, err)
	}
	for _, bad := range []string{"-1ms", "1s"} {
		if _, err := Load([]byte(yamlAt("store.sync_delay", bad)), nil); err == nil || !strings.Contains(err.Error(), "store.sync_delay") {
			t.Errorf("sync_delay %s: %v, want an error naming store.sync_delay", bad, err)
		}
	}
	if d := Default().Store.SyncDelay; d != 0 {
		t.Errorf("default sync_delay %v, want 0", d)
	}
}
