package embed

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

var referencePath = filepath.Join("..", "..", "shared", "data", "use-lite", "reference.json")

type referenceCase struct {
	Text      string    `json:"text"`
	Tokens    []int     `json:"tokens"`
	Embedding []float32 `json:"embedding"`
}

func loadReference(t testing.TB) []referenceCase {
	t.Helper()
	b, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("reference data (expected at %s): %v", referencePath, err)
	}
	var ref struct {
		Cases []referenceCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) != 410 {
		t.Fatalf("reference has %d cases, want 410", len(ref.Cases))
	}
	return ref.Cases
}

var (
	testUSEOnce sync.Once
	testUSE     *USE
	testUSEErr  error
)

func sharedUSE(t testing.TB) *USE {
	t.Helper()
	testUSEOnce.Do(func() { testUSE, testUSEErr = NewUSE(DefaultUSEConfig()) })
	if testUSEErr != nil {
		t.Fatal(testUSEErr)
	}
	return testUSE
}

// TestUSEParity checks every reference case: identical token ids and an
// embedding within cosine 0.9999 of the reference implementation's.
// Texts are identified by index only in failures.
func TestUSEParity(t *testing.T) {
	cases := loadReference(t)
	u := sharedUSE(t)
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.Text
		tk, err := u.Tokenize(c.Text)
		if err != nil {
			t.Errorf("case %d: tokenize: %v", i, err)
			continue
		}
		if !slices.Equal(tk.IDs, c.Tokens) {
			t.Errorf("case %d: token ids differ: got %d ids %v, want %d ids %v", i, len(tk.IDs), head(tk.IDs), len(c.Tokens), head(c.Tokens))
		}
		if tk.Clipped != (len(c.Tokens) > USEMaxTokens) {
			t.Errorf("case %d: Clipped = %v with %d tokens", i, tk.Clipped, len(c.Tokens))
		}
	}
	vecs, err := u.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	worst, worstAt := 2.0, -1
	for i, c := range cases {
		if len(vecs[i]) != USEDim {
			t.Fatalf("case %d: dim %d", i, len(vecs[i]))
		}
		cos := Cosine(vecs[i], c.Embedding)
		if cos < worst {
			worst, worstAt = cos, i
		}
		if cos < 0.9999 {
			t.Errorf("case %d (%d tokens): cosine to reference %.6f < 0.9999", i, len(c.Tokens), cos)
		}
	}
	t.Logf("worst cosine to reference over %d cases: %.7f (case %d)", len(cases), worst, worstAt)
}

func head(ids []int) []int {
	if len(ids) > 12 {
		return ids[:12]
	}
	return ids
}

func TestUSEEmptyText(t *testing.T) {
	u := sharedUSE(t)
	for _, text := range []string{"", " ", "\t\n ", "\u00a0\u3000"} {
		if _, err := u.Embed(context.Background(), []string{"fine", text}); !errors.Is(err, ErrEmptyText) {
			t.Errorf("Embed(%q) error = %v, want ErrEmptyText", text, err)
		}
		if _, err := u.Tokenize(text); !errors.Is(err, ErrEmptyText) {
			t.Errorf("Tokenize(%q) error = %v, want ErrEmptyText", text, err)
		}
	}
	if ErrEmptyText.Error() != "embed: empty text" {
		t.Errorf("ErrEmptyText = %q", ErrEmptyText)
	}
}
