package funnel

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idem-dev/idem/embed"
	"github.com/idem-dev/idem/internal/publicdata"
	"github.com/idem-dev/idem/ledger"
)

// stsSentences reads distinct sentences of the STS benchmark, real prose of
// the kind agents put in text fields.
func stsSentences(b *testing.B, n int) []string {
	b.Helper()
	f, err := os.Open(publicdata.Path(b, "upstream", "stsb", "sts-train.csv"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(out) < n {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) < 7 {
			continue
		}
		for _, s := range cols[5:7] {
			if len(strings.Fields(s)) >= 6 && !seen[s] && len(out) < n {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	if len(out) < n {
		b.Fatalf("only %d sentences", len(out))
	}
	return out
}

// populate records n completed send_email calls in session s1, each with
// its own sentence as body, embedded in one batch.
func populate(b *testing.B, e *env, bodies []string) {
	b.Helper()
	ctx := context.Background()
	views := make([]string, len(bodies))
	args := make([][]byte, len(bodies))
	for i, body := range bodies {
		a, _ := json.Marshal(map[string]string{"to": "ann@example.com", "body": body})
		args[i] = a
		call, err := e.f.canon.Canonicalize("send_email", a)
		if err != nil {
			b.Fatal(err)
		}
		views[i] = call.TextView()
	}
	vecs, err := encoder(b).Embed(ctx, views)
	if err != nil {
		b.Fatal(err)
	}
	for i := range bodies {
		call, _ := e.f.canon.Canonicalize("send_email", args[i])
		got, err := e.ledger.Claim(ctx, ledger.ClaimRequest{
			Tenant: "acme", Key: fmt.Sprintf("wf:%d:send_email", i), Session: "s1", Workflow: "wf",
			Step: fmt.Sprint(i), Tool: "send_email", Canonical: call.Canonical, Hash: call.Hash,
			Identity: call.IdentityDigest, Embedding: vecs[i], EmbeddingModel: embed.USEName,
		})
		if err != nil || got.Outcome != ledger.Claimed {
			b.Fatalf("claim %d: %v %v", i, got.Outcome, err)
		}
		if _, err := e.ledger.Complete(ctx, "acme", got.Record.Key, got.Token, json.RawMessage(`{"ok":true}`)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheck measures a whole check, by deciding stage, at session
// sizes 10, 100 and 1,000. The semantic checks are reworded duplicates
// (decided confirm, so nothing is claimed and the session keeps its size):
// "cold" embeds the text on every check, "warm" finds it in an embed.Cache.
func BenchmarkCheck(b *testing.B) {
	sentences := stsSentences(b, 1000)
	for _, n := range []int{10, 100, 1000} {
		cold := newEnv(b, options{budget: time.Second})
		populate(b, cold, sentences[:n])
		cache, err := embed.NewCache(encoder(b), embed.DefaultCacheConfig())
		if err != nil {
			b.Fatal(err)
		}
		warm := newEnv(b, options{budget: time.Second, embedder: cache})
		populate(b, warm, sentences[:n])
		target := sentences[n/2]
		exact, _ := json.Marshal(map[string]string{"body": target, "to": "ann@example.com"})
		reworded, _ := json.Marshal(map[string]string{"to": "ann@example.com", "body": "Note: " + strings.TrimSuffix(target, ".") + "!"})

		run := func(name string, e *env, req Request, wantStage Stage) {
			b.Run(fmt.Sprintf("%s/session=%d", name, n), func(b *testing.B) {
				b.ReportAllocs()
				req.Tenant, req.Session, req.Workflow = "acme", "s1", "wf"
				var lat []time.Duration
				for b.Loop() {
					t0 := time.Now()
					res, err := e.f.Check(context.Background(), req)
					lat = append(lat, time.Since(t0))
					if err != nil {
						b.Fatal(err)
					}
					if res.Stage != wantStage {
						b.Fatalf("decided at %s (%s), want %s", res.Stage, res.Reason, wantStage)
					}
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)*50/100].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
		run("key-hit", cold, Request{Step: fmt.Sprint(n / 2), Tool: "send_email", Arguments: exact}, StageKey)
		run("exact-hit", cold, Request{Step: "new", Tool: "send_email", Arguments: exact}, StageExact)
		run("semantic-cold", cold, Request{Step: "new", Tool: "send_email", Arguments: reworded}, StageSemantic)
		run("semantic-warm", warm, Request{Step: "new", Tool: "send_email", Arguments: reworded}, StageSemantic)
	}
}

// BenchmarkResultJSON writes a replayed check's answer as the server does
// (an Encoder, HTML left unescaped): through Result.MarshalJSON, whose
// output encoding/json checks and compacts again, against Result.Wire,
// encoded in one pass.
func BenchmarkResultJSON(b *testing.B) {
	r := Result{Decision: Duplicate, Stage: StageKey, Key: "wf:3:charge_card", Policy: "default",
		Reason: "the call's own key has a record: its result is replayed",
		Match: &Match{Key: "wf:3:charge_card", Tool: "charge_card", Workflow: "wf", Session: "s1", Step: "3", Status: "success",
			Result: json.RawMessage(`{"charge_id":"ch_1","status":"succeeded"}`), Similarity: 1, CreatedAt: 1764639155000},
		Hash: 0x1234567890abcdef, IdentityDigest: 0xfedcba0987654321, TimingsUS: map[string]int64{"canon": 12, "key": 20, "total": 40}}
	for _, v := range []struct {
		name string
		v    func() any
	}{{"marshaler", func() any { return r }}, {"wire", r.Wire}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf strings.Builder
			for b.Loop() {
				buf.Reset()
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(v.v()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
