package main

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func runEmbedCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"embed"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// parseCosines reads the table printed by --cosine.
func parseCosines(t *testing.T, out string) [][]float64 {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var m [][]float64
	for _, l := range lines[1:] {
		fields := strings.Fields(l)[1:]
		row := make([]float64, len(fields))
		for i, f := range fields {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("bad table line %q", l)
			}
			row[i] = v
		}
		m = append(m, row)
	}
	return m
}

func TestEmbedCosine(t *testing.T) {
	code, out, errOut := runEmbedCmd(t, "", "--cosine",
		"How do I reset my password?", "What is the procedure to change my password?", "The weather in Paris is sunny today.")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	m := parseCosines(t, out)
	if len(m) != 3 || len(m[0]) != 3 {
		t.Fatalf("table is not 3×3:\n%s", out)
	}
	for i := range 3 {
		if math.Abs(m[i][i]-1) > 1e-3 {
			t.Errorf("self-cosine %v", m[i][i])
		}
	}
	if !(m[0][1] > 0.8 && m[0][2] < 0.3 && m[0][1] == m[1][0]) {
		t.Errorf("paraphrases should score high and unrelated texts low:\n%s", out)
	}
}

func TestEmbedJSONFromStdin(t *testing.T) {
	long := strings.Repeat("word ", 200)
	code, out, errOut := runEmbedCmd(t, "send the invoice to bob\n\n"+long+"\n", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct {
		Model      string
		Dim        int
		Embeddings []struct {
			Index   int
			Tokens  int
			Clipped bool
			Vector  []float64
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Dim != 512 || got.Model == "" || len(got.Embeddings) != 2 {
		t.Fatalf("model %q dim %d, %d embeddings (blank lines must be skipped)", got.Model, got.Dim, len(got.Embeddings))
	}
	for _, e := range got.Embeddings {
		var ss float64
		for _, x := range e.Vector {
			ss += x * x
		}
		if len(e.Vector) != 512 || math.Abs(ss-1) > 1e-4 {
			t.Errorf("embedding %d: %d values, squared norm %v", e.Index, len(e.Vector), ss)
		}
	}
	if got.Embeddings[0].Clipped || !got.Embeddings[1].Clipped || got.Embeddings[1].Tokens <= 128 {
		t.Errorf("clipping not reported: %+v", got.Embeddings[1].Tokens)
	}
}

func TestEmbedBadInput(t *testing.T) {
	for name, args := range map[string][]string{
		"empty text":         {"ok", ""},
		"blank text":         {"   "},
		"no text":            {},
		"json and cosine":    {"--json", "--cosine", "a"},
		"unknown flag":       {"--bogus", "a"},
		"model without url":  {"--model", "m", "a"},
		"url without model":  {"--openai-url", "http://localhost:1/v1", "a"},
		"bad url":            {"--openai-url", "localhost", "--model", "m", "a"},
		"unset key variable": {"--openai-url", "http://localhost:1/v1", "--model", "m", "--api-key-env", "IDEM_TEST_SURELY_UNSET", "a"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := runEmbedCmd(t, "", args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2 (stderr %q)", code, errOut)
			}
			if lines := strings.Count(errOut, "\n"); lines != 1 || !strings.HasPrefix(errOut, "idem embed: ") {
				t.Fatalf("want a one-line error, got %q", errOut)
			}
		})
	}
}

func TestEmbedOpenAIEndpoint(t *testing.T) {
	var auth string
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		json.NewDecoder(r.Body).Decode(&body)
		n := len(body["input"].([]any))
		data := make([]map[string]any, n)
		for i := range data {
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": []float32{float32(i + 1), 1, 0}}
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": body["model"]})
	}))
	defer srv.Close()
	t.Setenv("IDEM_TEST_EMBED_KEY", "sk-from-env")
	code, out, errOut := runEmbedCmd(t, "", "--openai-url", srv.URL+"/v1", "--model", "nomic-embed-text",
		"--dimensions", "3", "--api-key-env", "IDEM_TEST_EMBED_KEY", "--json", "first", "second")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if auth != "Bearer sk-from-env" || body["model"] != "nomic-embed-text" || body["dimensions"] != float64(3) {
		t.Fatalf("request: auth %q body %v", auth, body)
	}
	var got struct {
		Model      string
		Dim        int
		Embeddings []struct{ Vector []float64 }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Dim != 3 || len(got.Embeddings) != 2 || math.Abs(got.Embeddings[1].Vector[0]-2/math.Sqrt(5)) > 1e-6 {
		t.Fatalf("output %s", out)
	}

	// A failing endpoint is exit 1, not 2.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"model \"x\" not found, try pulling it first"}`))
	}))
	defer down.Close()
	code, _, errOut = runEmbedCmd(t, "", "--openai-url", down.URL+"/v1", "--model", "x", "a")
	if code != 1 || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want 1 and one line", code, errOut)
	}
}
