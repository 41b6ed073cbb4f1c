package ann

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/cespare/xxhash/v2"
)

// Embedder is what the vector cache needs of an encoder.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Name() string
	Dim() int
}

// ErrCache: the vector cache file is not one this encoder wrote.
var ErrCache = errors.New("ann: vector cache does not match")

const cacheMagic = "IDEMVEC1"

// Vectors returns one vector per text, in order, taken from the cache file
// at path where it holds the text and computed with enc otherwise. The
// cache is append-only: a header (magic, dimension, model name), then
// records of (xxhash64 of the text, Dim little-endian float32). New vectors
// are appended and synced every batch texts, so an interrupted run loses
// at most one batch, and a torn last record is cut off at the next open.
// progress, if not nil, is called after every batch with the number of
// texts that have a vector.
func Vectors(ctx context.Context, enc Embedder, texts []string, path string, batch int, progress func(done, total int)) ([][]float32, error) {
	if batch < 1 {
		batch = 256
	}
	dim := enc.Dim()
	cached, f, err := openCache(path, enc.Name(), dim)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	slab := make([]float32, len(texts)*dim)
	out := make([][]float32, len(texts))
	var missing []int
	for i, t := range texts {
		out[i] = slab[i*dim : (i+1)*dim : (i+1)*dim]
		if v, ok := cached[xxhash.Sum64String(t)]; ok {
			copy(out[i], v)
		} else {
			missing = append(missing, i)
		}
	}
	clear(cached)
	done := len(texts) - len(missing)
	if progress != nil {
		progress(done, len(texts))
	}
	rec := make([]byte, 8+4*dim)
	for len(missing) > 0 {
		n := min(batch, len(missing))
		idx := missing[:n]
		missing = missing[n:]
		ts := make([]string, n)
		for j, i := range idx {
			ts[j] = texts[i]
		}
		vs, err := enc.Embed(ctx, ts)
		if err != nil {
			return nil, fmt.Errorf("embed %d texts: %w", n, err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		for j, i := range idx {
			if len(vs[j]) != dim {
				return nil, fmt.Errorf("%w: encoder gave %d values, want %d", ErrCache, len(vs[j]), dim)
			}
			copy(out[i], vs[j])
			binary.LittleEndian.PutUint64(rec, xxhash.Sum64String(texts[i]))
			for k, x := range vs[j] {
				binary.LittleEndian.PutUint32(rec[8+4*k:], math.Float32bits(x))
			}
			if _, err := w.Write(rec); err != nil {
				return nil, fmt.Errorf("write %s: %w", path, err)
			}
		}
		if err := w.Flush(); err != nil {
			return nil, fmt.Errorf("write %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			return nil, fmt.Errorf("sync %s: %w", path, err)
		}
		done += n
		if progress != nil {
			progress(done, len(texts))
		}
	}
	return out, nil
}

// openCache reads the cache at path (creating it with a header if absent)
// and returns its vectors by text hash and the file, positioned at the end
// of its last whole record.
func openCache(path, model string, dim int) (map[uint64][]float32, *os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	header := make([]byte, 0, len(cacheMagic)+6+len(model))
	header = append(header, cacheMagic...)
	header = binary.LittleEndian.AppendUint32(header, uint32(dim))
	header = binary.LittleEndian.AppendUint16(header, uint16(len(model)))
	header = append(header, model...)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if st.Size() == 0 {
		if _, err := f.Write(header); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("write %s: %w", path, err)
		}
		return map[uint64][]float32{}, f, nil
	}
	r := bufio.NewReaderSize(f, 1<<20)
	got := make([]byte, len(header))
	if _, err := io.ReadFull(r, got); err != nil || string(got) != string(header) {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s was not written for %s at %d dimensions", ErrCache, path, model, dim)
	}
	vecs := map[uint64][]float32{}
	rec := make([]byte, 8+4*dim)
	end := int64(len(header))
	for {
		if _, err := io.ReadFull(r, rec); err != nil {
			break // EOF, or a torn last record: cut it off
		}
		v := make([]float32, dim)
		for k := range v {
			v[k] = math.Float32frombits(binary.LittleEndian.Uint32(rec[8+4*k:]))
		}
		vecs[binary.LittleEndian.Uint64(rec)] = v
		end += int64(len(rec))
	}
	if err := f.Truncate(end); err != nil {
		f.Close()
		return nil, nil, err
	}
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		f.Close()
		return nil, nil, err
	}
	return vecs, f, nil
}
