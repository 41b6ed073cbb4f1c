package ann

import (
	"context"
	"fmt"
	"strconv"

	coder "github.com/coder/hnsw"

	"github.com/idem-dev/idem/index"
	"github.com/idem-dev/idem/index/hnsw"
)

// Builds returns the indexes cfg measures: "idem-hnsw" (index/hnsw),
// "exact" (index.Flat, the scan idem runs on sessions), "idem-index"
// (index.Flat searching the partition through its graph, at the index's
// efSearch: what the funnel gets, re-scoring included) and, with
// cfg.Coder, "coder-hnsw" (github.com/coder/hnsw at the commit DESIGN.md
// measured, set to the same M and efSearch; it has no separate
// efConstruction).
func Builds(cfg Config) map[string]Build {
	b := map[string]Build{"idem-hnsw": ourBuild(cfg), "exact": exactBuild, "idem-index": indexBuild(cfg)}
	if cfg.Coder {
		b["coder-hnsw"] = coderBuild(cfg)
	}
	return b
}

type ours struct{ g *hnsw.Graph }

func (o ours) Search(q []float32, k, ef int) ([]int, error) {
	rs, err := o.g.SearchEf(q, k, ef)
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = int(r.Node)
	}
	return out, err
}

func ourBuild(cfg Config) Build {
	return func(base [][]float32) (Searcher, int, error) {
		hc := hnsw.DefaultConfig()
		hc.Dim, hc.M, hc.EfConstruction, hc.Seed = len(base[0]), cfg.M, cfg.EfConstruction, cfg.Seed
		g, err := hnsw.New(hc)
		if err != nil {
			return nil, 0, err
		}
		g.Grow(len(base))
		for i, v := range base {
			if _, err := g.Add(v); err != nil {
				return nil, 0, fmt.Errorf("vector %d: %w", i, err)
			}
		}
		return ours{g}, g.Bytes(), nil
	}
}

// flat is an index.Flat holding base as one partition; ef is the
// efSearch it searches with (0: it scans).
type flat struct {
	f  *index.Flat
	ef int
}

func (e flat) Search(q []float32, k, _ int) ([]int, error) {
	hits, err := e.f.Search(context.Background(), "s", "t", q, k)
	out := make([]int, len(hits))
	for i, h := range hits {
		out[i] = int(h.Seq - 1)
	}
	return out, err
}

func (e flat) FixedEf() int { return e.ef }

func (e flat) Close() error { return e.f.Close(context.Background()) }

func exactBuild(base [][]float32) (Searcher, int, error) {
	ic := index.DefaultConfig()
	ic.ANNMin = 0
	f, err := newFlat(ic, base)
	return flat{f, 0}, 0, err
}

func indexBuild(cfg Config) Build {
	return func(base [][]float32) (Searcher, int, error) {
		ic := index.DefaultConfig()
		ic.ANNMin = 1 // whatever N, the graph
		ic.ANN.M, ic.ANN.EfConstruction, ic.ANN.Seed = cfg.M, cfg.EfConstruction, cfg.Seed
		f, err := newFlat(ic, base)
		if err != nil {
			return nil, 0, err
		}
		ctx := context.Background()
		if _, err := f.Search(ctx, "s", "t", base[0], 1); err != nil { // asks for the graph
			return nil, 0, err
		}
		if err := f.WaitGraphs(ctx); err != nil {
			return nil, 0, err
		}
		if f.Stats().Graphs != 1 {
			return nil, 0, fmt.Errorf("index built no graph")
		}
		return flat{f, ic.ANN.EfSearch}, 0, nil
	}
}

// newFlat returns an index of one scope "s" holding base under tag "t",
// Seq i+1 for base[i].
func newFlat(ic index.Config, base [][]float32) (*index.Flat, error) {
	ic.Dim, ic.MaxPerScope, ic.MaxVectors, ic.IdleTTL = len(base[0]), len(base), 2*len(base), 0
	f, err := index.New(ic, nil)
	if err != nil {
		return nil, err
	}
	es := make([]index.Entry, len(base))
	for i, v := range base {
		es[i] = index.Entry{ID: strconv.Itoa(i), Tag: "t", Seq: uint64(i + 1), Vector: v}
	}
	if err := f.Add("s", es...); err != nil {
		return nil, err
	}
	return f, nil
}

type coderIndex struct{ g *coder.Graph[int] }

func (c coderIndex) Search(q []float32, k, ef int) ([]int, error) {
	c.g.EfSearch = ef
	ns := c.g.Search(q, k)
	out := make([]int, len(ns))
	for i, n := range ns {
		out[i] = n.Key
	}
	return out, nil
}

func coderBuild(cfg Config) Build {
	return func(base [][]float32) (Searcher, int, error) {
		g := coder.NewGraph[int]()
		g.M, g.EfSearch = cfg.M, cfg.EfConstruction
		g.Distance = coder.CosineDistance
		for i, v := range base {
			g.Add(coder.MakeNode(i, v))
		}
		return coderIndex{g}, 0, nil
	}
}
