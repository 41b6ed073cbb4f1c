package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idem-dev/idem/internal/publicdata"
)

// TestImportersRebuildCommittedSets re-imports every committed set from
// the upstream data and checks that it comes out byte for byte: the
// committed sets are what the documented commands produce.
func TestImportersRebuildCommittedSets(t *testing.T) {
	upstream := publicdata.Path(t, "upstream")
	tests := []struct {
		format, src, set string
		limit            int
	}{
		{"tau", "tau-bench/retail", "../testdata/traffic/tau-retail", 0},
		{"tau", "tau-bench/airline", "../testdata/traffic/tau-airline", 0},
		{"sgd", "sgd/derived/sgd_transactional_calls_dev.jsonl", "../testdata/traffic/sgd-dev", 0},
		{"bfcl", "bfcl", "../testdata/traffic/bfcl", 0},
		{"stsb", "stsb/sts-dev.csv", "../testdata/traffic/stsb-dev", 0},
		{"stsb", "stsb/sts-train.csv", "../testdata/traffic/stsb-train", 0},
		{"openai-chat", "toolbench/answer", "../testdata/traffic/toolbench-chat", 0},
		{"stsb", "stsb/sts-dev.csv", "testdata/stsb-dev-small", 12},
		{"stsb", "stsb/sts-train.csv", "testdata/stsb-train-small", 12},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.set), func(t *testing.T) {
			im, ok := LookupImporter(tt.format)
			if !ok {
				t.Fatalf("no importer %q", tt.format)
			}
			out := t.TempDir()
			if _, err := im.Import(ImportConfig{Src: filepath.Join(upstream, tt.src), Out: out, Limit: tt.limit}); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"traffic.jsonl", "tools.json", "README.md"} {
				want, errW := os.ReadFile(filepath.Join(tt.set, name))
				got, errG := os.ReadFile(filepath.Join(out, name))
				if (errW == nil) != (errG == nil) {
					t.Errorf("%s: committed %v, rebuilt %v", name, errW, errG)
					continue
				}
				if !bytes.Equal(want, got) {
					t.Errorf("%s differs from a fresh import: rebuild the set (see its README)", name)
				}
			}
		})
	}
}

// TestImportLabelRules checks the label rules on the imported sets: every
// duplicate names an earlier event of its session with the same tool and
// intent; every hard negative is expected to execute.
func TestImportLabelRules(t *testing.T) {
	dirs, _ := filepath.Glob("../testdata/traffic/*")
	for _, dir := range dirs {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			continue
		}
		set, err := ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range set.Events {
			if e.Truth == nil {
				continue
			}
			if e.HasTag("hard-negative") && e.Truth.Expect != "execute" {
				t.Errorf("%s:%d: a hard negative expected to be %s", dir, e.Line, e.Truth.Expect)
			}
			if e.Truth.Expect != "duplicate" {
				continue
			}
			if e.Truth.Of == 0 {
				t.Errorf("%s:%d: a duplicate without truth.of", dir, e.Line)
				continue
			}
			of := set.Events[e.Truth.Of-1]
			if of.Session != e.Session || of.Tool != e.Tool || of.Truth.Intent != e.Truth.Intent || of.Truth.Expect != "execute" {
				t.Errorf("%s:%d: duplicate of line %d, which is another session, tool or intent", dir, e.Line, e.Truth.Of)
			}
		}
	}
}

// TestChatImportReview imports a chat log, replays it unlabelled, and
// gets hit rates and a review file of borderline pairs.
func TestChatImportReview(t *testing.T) {
	out := t.TempDir()
	st, err := chatImporter.Import(ImportConfig{Src: "testdata/chatlog/chat.jsonl", Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 5 || st.Unlabelled != 5 || st.Sessions != 2 {
		t.Fatalf("stats %+v, want 5 unlabelled events in 2 sessions", st)
	}
	set, err := ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if o := set.Events[0].Outcome; o.Status != "failure" || !o.Transient {
		t.Errorf("a call answered with an error: outcome %+v, want a transient failure", o)
	}
	r := runSet(t, out, testConfig())
	if r.Labelled || r.Overall.Unlabelled != 5 {
		t.Errorf("labelled %v, unlabelled %d", r.Labelled, r.Overall.Unlabelled)
	}
	// The repeated Paris lookup (arguments once a string, once an object)
	// is an exact hit.
	if r.Decisions["duplicate/exact"] != 1 {
		t.Errorf("decisions %v, want one exact duplicate", r.Decisions)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	if !strings.Contains(text.String(), "decisions (decision/stage)") || !strings.Contains(text.String(), "borderline pairs for review") {
		t.Errorf("unlabelled table lacks hit rates:\n%s", text.String())
	}
	var rev bytes.Buffer
	if err := r.WriteReview(&rev); err != nil {
		t.Fatal(err)
	}
	if strings.Count(rev.String(), "\n") != len(r.Review) {
		t.Errorf("review file has %d lines for %d pairs", strings.Count(rev.String(), "\n"), len(r.Review))
	}
}
