package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/idem-dev/idem/embed"
)

func init() {
	register("embed", command{
		summary: "embed texts (built-in encoder or an OpenAI-compatible endpoint); print vectors or cosines",
		run:     runEmbed,
	})
}

const embedUsage = `usage: idem embed [flags] TEXT...   (no TEXT: one text per line of stdin)

Prints, for each text, its token count under the built-in encoder and the
pairwise cosine table, or the vectors with --json.

flags:
  --json               print {"model","dim","embeddings":[{"index","tokens","clipped","vector"}]}
  --cosine             print only the pairwise cosine table
  --openai-url URL     use an OpenAI-compatible endpoint (e.g. http://localhost:11434/v1)
  --model NAME         the endpoint's model (required with --openai-url)
  --dimensions N       ask the endpoint for N-dimensional vectors
  --api-key-env VAR    read the endpoint's API key from environment variable VAR
  --timeout D          give up after D (default 60s)
`

// embedUsageError is bad input: exit status 2.
type embedUsageError struct{ msg string }

func (e embedUsageError) Error() string { return e.msg }

func runEmbed(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := embedCommand(ctx, args, stdin, stdout)
	var ue embedUsageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		io.WriteString(stdout, embedUsage)
		return 0
	case errors.As(err, &ue), errors.Is(err, embed.ErrEmptyText), errors.Is(err, embed.ErrConfig):
		fmt.Fprintf(stderr, "idem embed: %v\n", oneLine(err))
		return 2
	default:
		fmt.Fprintf(stderr, "idem embed: %v\n", oneLine(err))
		return 1
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

type embedFlags struct {
	json, cosine bool
	url, model   string
	dimensions   int
	apiKeyEnv    string
	timeout      time.Duration
}

// parseEmbedArgs accepts flags before, between and after the texts ("--"
// ends the flags).
func parseEmbedArgs(args []string) (embedFlags, []string, error) {
	var f embedFlags
	fs := flag.NewFlagSet("embed", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&f.json, "json", false, "")
	fs.BoolVar(&f.cosine, "cosine", false, "")
	fs.StringVar(&f.url, "openai-url", "", "")
	fs.StringVar(&f.model, "model", "", "")
	fs.IntVar(&f.dimensions, "dimensions", 0, "")
	fs.StringVar(&f.apiKeyEnv, "api-key-env", "", "")
	fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "")
	var texts []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return f, nil, err
			}
			return f, nil, embedUsageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			texts = append(texts, rest...)
			break
		}
		texts = append(texts, rest[0])
		args = rest[1:]
	}
	switch {
	case f.json && f.cosine:
		return f, nil, embedUsageError{"--json and --cosine are exclusive"}
	case f.url == "" && (f.model != "" || f.dimensions != 0 || f.apiKeyEnv != ""):
		return f, nil, embedUsageError{"--model, --dimensions and --api-key-env need --openai-url"}
	case f.url != "" && f.model == "":
		return f, nil, embedUsageError{"--openai-url needs --model"}
	case f.dimensions < 0:
		return f, nil, embedUsageError{"--dimensions must be positive"}
	case f.timeout <= 0:
		return f, nil, embedUsageError{"--timeout must be positive"}
	}
	return f, texts, nil
}

func embedCommand(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	f, texts, err := parseEmbedArgs(args)
	if err != nil {
		return err
	}
	if len(texts) == 0 {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.TrimSpace(line) != "" {
				texts = append(texts, line)
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("read stdin: %w", err)
		}
	}
	if len(texts) == 0 {
		return embedUsageError{"no text given (run 'idem embed --help')"}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()

	// The built-in encoder also gives token counts (it tokenizes anyway).
	use, err := embed.NewUSE(embed.DefaultUSEConfig())
	if err != nil {
		return err
	}
	tokens := make([]embed.Tokens, len(texts))
	for i, t := range texts {
		if tokens[i], err = use.Tokenize(t); err != nil {
			return fmt.Errorf("text %d: %w", i+1, err)
		}
	}
	var e embed.Embedder = use
	if f.url != "" {
		cfg := embed.DefaultOpenAIConfig()
		cfg.BaseURL, cfg.Model, cfg.Dimensions = f.url, f.model, f.dimensions
		if f.apiKeyEnv != "" {
			key, ok := os.LookupEnv(f.apiKeyEnv)
			if !ok || key == "" {
				return embedUsageError{fmt.Sprintf("environment variable %s (from --api-key-env) is not set", f.apiKeyEnv)}
			}
			cfg.APIKey = key
		}
		if e, err = embed.NewOpenAI(cfg); err != nil {
			return err
		}
	}
	vecs, err := e.Embed(ctx, texts)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if f.json {
		type item struct {
			Index   int       `json:"index"`
			Tokens  *int      `json:"tokens,omitempty"`
			Clipped *bool     `json:"clipped,omitempty"`
			Vector  []float32 `json:"vector"`
		}
		out := struct {
			Model      string `json:"model"`
			Dim        int    `json:"dim"`
			Embeddings []item `json:"embeddings"`
		}{Model: e.Name(), Dim: e.Dim()}
		for i, v := range vecs {
			it := item{Index: i + 1, Vector: v}
			if f.url == "" {
				n, c := tokens[i].Count(), tokens[i].Clipped
				it.Tokens, it.Clipped = &n, &c
			}
			out.Embeddings = append(out.Embeddings, it)
		}
		enc := json.NewEncoder(w)
		return enc.Encode(out)
	}
	if !f.cosine {
		fmt.Fprintf(w, "model %s, %d dimensions\n", e.Name(), e.Dim())
		for i, tk := range tokens {
			if f.url != "" {
				break // token counts are the built-in encoder's
			}
			note := ""
			if tk.Clipped {
				note = fmt.Sprintf(" (the built-in encoder reads only the first %d)", embed.USEMaxTokens)
			}
			fmt.Fprintf(w, "text %d: %d tokens%s\n", i+1, tk.Count(), note)
		}
		if len(vecs) < 2 {
			return nil
		}
		io.WriteString(w, "cosine:\n")
	}
	writeCosineTable(w, vecs)
	return nil
}

func writeCosineTable(w io.Writer, vecs [][]float32) {
	fmt.Fprintf(w, "%6s", "")
	for j := range vecs {
		fmt.Fprintf(w, " %7s", fmt.Sprintf("#%d", j+1))
	}
	io.WriteString(w, "\n")
	for i, a := range vecs {
		fmt.Fprintf(w, "%6s", fmt.Sprintf("#%d", i+1))
		for _, b := range vecs {
			fmt.Fprintf(w, " %7.4f", embed.Cosine(a, b))
		}
		io.WriteString(w, "\n")
	}
}
