package ann

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// WriteText prints the report as a table.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "N %d, %d queries, %d-d, k %d, M %d, efConstruction %d, seed %d, GOMAXPROCS %d\n\n",
		r.N, r.Queries, r.Dim, r.K, r.M, r.EfConstruction, r.Seed, r.GOMAXPROCS)
	fmt.Fprintf(bw, "%-11s %9s %9s %10s %11s %11s %9s %11s %9s\n", "index", "efSearch", "recall@1", "recall@"+fmt.Sprint(r.K), "queries/s", "q/cpu s", "build s", "build cpu s", "B/vector")
	for _, x := range r.Results {
		ef, bytes := "-", "-"
		if x.EfSearch > 0 {
			ef = fmt.Sprint(x.EfSearch)
		}
		if x.BytesPer > 0 {
			bytes = fmt.Sprintf("%.0f", x.BytesPer)
		}
		fmt.Fprintf(bw, "%-11s %9s %9.4f %10.4f %11.0f %11.0f %9.1f %11.1f %9s\n", x.Index, ef, x.Recall1, x.RecallK, x.QPS, x.QPSCPU, x.BuildS, x.BuildCPUS, bytes)
	}
	return bw.Flush()
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Meta describes an exported data set for bench/ann_reference.py.
type Meta struct {
	N              int    `json:"n"`
	Queries        int    `json:"queries"`
	Dim            int    `json:"dim"`
	K              int    `json:"k"`
	M              int    `json:"m"`
	EfConstruction int    `json:"ef_construction"`
	EfSearch       []int  `json:"ef_search"`
	Seed           uint64 `json:"seed"`
}

// Export writes base.f32 and queries.f32 (row-major little-endian
// float32), truth.i32 (K little-endian int32 per query: the exact
// neighbours' rows in base) and meta.json to dir, so that another
// implementation can be measured on exactly the same vectors.
func Export(dir string, cfg Config, base, queries [][]float32, truth [][]int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, vs := range map[string][][]float32{"base.f32": base, "queries.f32": queries} {
		if err := writeBin(filepath.Join(dir, name), func(w *bufio.Writer) {
			var b [4]byte
			for _, v := range vs {
				for _, x := range v {
					binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
					w.Write(b[:])
				}
			}
		}); err != nil {
			return err
		}
	}
	if err := writeBin(filepath.Join(dir, "truth.i32"), func(w *bufio.Writer) {
		var b [4]byte
		for _, t := range truth {
			for j := range cfg.K {
				v := int32(-1)
				if j < len(t) {
					v = int32(t[j])
				}
				binary.LittleEndian.PutUint32(b[:], uint32(v))
				w.Write(b[:])
			}
		}
	}); err != nil {
		return err
	}
	meta := Meta{N: len(base), Queries: len(queries), Dim: len(base[0]), K: cfg.K, M: cfg.M,
		EfConstruction: cfg.EfConstruction, EfSearch: cfg.EfSearch, Seed: cfg.Seed}
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "meta.json"), append(data, '\n'), 0o644)
}

func writeBin(path string, fill func(*bufio.Writer)) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fill(w)
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
