package embed

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/idem-dev/idem/internal/publicdata"
)

var updateSample = flag.Bool("update-sample", false, "rewrite testdata/use-lite-reference-sample.json from the public data's reference.json")

// samplePath holds the first sampleCases cases of the public data's
// use-lite/reference.json: test strings, none taken from the data sets
// (the later cases quote tau-bench and STS-B), with the token ids and
// embeddings the reference implementation (@energetic-ai/embeddings@0.2.0
// on TensorFlow.js, Apache-2.0) computed for them. A bare clone checks
// parity on these.
var samplePath = filepath.Join("testdata", "use-lite-reference-sample.json")

const sampleCases = 50

type reference struct {
	Model     string          `json:"model"`
	Generator string          `json:"generator"`
	Note      string          `json:"note"`
	Cases     []referenceCase `json:"cases"`
}

func readReference(t testing.TB, path string) reference {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ref
}

func loadReferenceSample(t testing.TB) []referenceCase {
	t.Helper()
	ref := readReference(t, samplePath)
	if len(ref.Cases) != sampleCases {
		t.Fatalf("%s has %d cases, want %d", samplePath, len(ref.Cases), sampleCases)
	}
	return ref.Cases
}

// TestUSEParitySample is TestUSEParity on the committed sample: short and
// long texts, clipped ones (over 128 tokens), accents, CJK, Cyrillic,
// emoji, full-width forms and ligatures.
func TestUSEParitySample(t *testing.T) { checkParity(t, loadReferenceSample(t)) }

// TestUSEReferenceSample checks that the committed sample is the public
// reference's first cases, value for value (-update-sample rewrites it).
func TestUSEReferenceSample(t *testing.T) {
	full := readReference(t, publicdata.Path(t, "use-lite", "reference.json"))
	want := full
	want.Cases = full.Cases[:sampleCases]
	if *updateSample {
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(samplePath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := readReference(t, samplePath)
	if got.Model != want.Model || got.Generator != want.Generator || len(got.Cases) != len(want.Cases) {
		t.Fatalf("%s: model %q, generator %q, %d cases; want %q, %q, %d (rerun with -update-sample)",
			samplePath, got.Model, got.Generator, len(got.Cases), want.Model, want.Generator, len(want.Cases))
	}
	for i, c := range got.Cases {
		w := want.Cases[i]
		if c.Text != w.Text || !slices.Equal(c.Tokens, w.Tokens) || !slices.Equal(c.Embedding, w.Embedding) {
			t.Errorf("%s: case %d differs from the reference (rerun with -update-sample)", samplePath, i)
		}
	}
}
