package pairtrain

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/idem-dev/idem/bench"
)

// Cache keeps embeddings on disk, by the SHA-256 of the text, in one
// append-only file per encoder, so that a second training run embeds
// nothing. It stores the encoder's float32 values exactly: a run with the
// cache and one without compute the same cosines. A Cache is used by one
// goroutine at a time.
type Cache struct {
	enc  bench.Encoder
	path string
	vecs map[[32]byte][]float32
	dim  int
}

// cacheRecord is a record's size for dim values: the hash, the dimension
// (uint32) and the values (float32, little-endian).
func cacheRecord(dim int) int { return 32 + 4 + 4*dim }

// OpenCache opens (or starts) the cache of enc's vectors in dir; an empty
// dir means no cache on disk. A truncated last record (an interrupted
// run) is ignored and overwritten.
func OpenCache(dir string, enc bench.Encoder, dim int) (*Cache, error) {
	c := &Cache{enc: enc, vecs: map[[32]byte][]float32{}, dim: dim}
	if dir == "" {
		return c, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pairtrain: cache: %w", err)
	}
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == '@' || r == ' ' {
			return '_'
		}
		return r
	}, enc.Name())
	c.path = filepath.Join(dir, name+".vec")
	f, err := os.Open(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pairtrain: cache: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	buf := make([]byte, cacheRecord(dim))
	good := int64(0)
	for {
		if _, err := io.ReadFull(r, buf); err != nil {
			break // end of file, or a torn last record
		}
		if int(binary.LittleEndian.Uint32(buf[32:36])) != dim {
			return nil, fmt.Errorf("pairtrain: cache %s: a record of another dimension", c.path)
		}
		var k [32]byte
		copy(k[:], buf)
		v := make([]float32, dim)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[36+4*i:]))
		}
		c.vecs[k] = v
		good += int64(len(buf))
	}
	if st, err := os.Stat(c.path); err == nil && st.Size() != good {
		if err := os.Truncate(c.path, good); err != nil {
			return nil, fmt.Errorf("pairtrain: cache: %w", err)
		}
	}
	return c, nil
}

// Len is the number of vectors held.
func (c *Cache) Len() int { return len(c.vecs) }

// Embed returns the vectors of texts, embedding (in batches, appended to
// the file) those the cache lacks. progress, when set, is told how many
// texts were embedded so far.
func (c *Cache) Embed(ctx context.Context, texts []string, progress func(done, total int)) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var need []string
	seen := map[[32]byte]bool{}
	for i, t := range texts {
		k := sha256.Sum256([]byte(t))
		if v, ok := c.vecs[k]; ok {
			out[i] = v
		} else if !seen[k] {
			seen[k] = true
			need = append(need, t)
		}
	}
	const batch = 64
	for start := 0; start < len(need); start += batch {
		b := need[start:min(start+batch, len(need))]
		vs, err := c.enc.Embed(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("pairtrain: embed %d texts: %w", len(b), err)
		}
		if len(vs) != len(b) {
			return nil, fmt.Errorf("pairtrain: embedder returned %d vectors for %d texts", len(vs), len(b))
		}
		var rec []byte
		for j, t := range b {
			if len(vs[j]) != c.dim {
				return nil, fmt.Errorf("pairtrain: embedder returned %d values, want %d", len(vs[j]), c.dim)
			}
			k := sha256.Sum256([]byte(t))
			c.vecs[k] = vs[j]
			rec = append(rec, k[:]...)
			rec = binary.LittleEndian.AppendUint32(rec, uint32(c.dim))
			for _, x := range vs[j] {
				rec = binary.LittleEndian.AppendUint32(rec, math.Float32bits(x))
			}
		}
		if err := c.append(rec); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(start+len(b), len(need))
		}
	}
	for i, t := range texts {
		if out[i] == nil {
			out[i] = c.vecs[sha256.Sum256([]byte(t))]
		}
	}
	return out, nil
}

func (c *Cache) append(rec []byte) error {
	if c.path == "" {
		return nil
	}
	f, err := os.OpenFile(c.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pairtrain: cache: %w", err)
	}
	if _, err := f.Write(rec); err != nil {
		f.Close()
		return fmt.Errorf("pairtrain: cache: %w", err)
	}
	return f.Close()
}
