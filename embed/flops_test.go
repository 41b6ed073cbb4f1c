package embed

import (
	"github.com/idem-dev/idem/internal/publicdata"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	graphConst = regexp.MustCompile(`^CONST (\S+) \[([^\]]*)\]`)
	graphOp    = regexp.MustCompile(`^(MatMul|Conv2D|BatchMatMul) (\S+) <- \['([^']*)', '([^']*)'\]`)
)

// graphMACs counts the multiply-adds of the reference graph's matrix
// products for one text of n tokens: MatMul and 1x1 Conv2D nodes take their
// [k][p] from the weight constant (n rows, one for the tanh layer, which
// reads the pooled vector); each BatchMatMul of attention is heads × n × n ×
// depth = n² × the layer's width, read from its qkv kernel.
func graphMACs(t testing.TB, n int) int64 {
	t.Helper()
	graphPath := publicdata.Path(t, "use-lite", "graph.txt")
	b, err := os.ReadFile(graphPath)
	if err != nil {
		t.Fatalf("graph (expected at %s): %v", graphPath, err)
	}
	shapes := map[string][]int64{}
	type op struct{ kind, name, in2 string }
	var ops []op
	for _, line := range strings.Split(string(b), "\n") {
		if m := graphConst.FindStringSubmatch(line); m != nil {
			var dims []int64
			for _, d := range strings.Split(m[2], ",") {
				if d = strings.Trim(strings.TrimSpace(d), "'"); d != "" {
					v, err := strconv.ParseInt(d, 10, 64)
					if err != nil {
						t.Fatalf("graph: shape of %s: %v", m[1], err)
					}
					dims = append(dims, v)
				}
			}
			shapes[m[1]] = dims
		}
		if m := graphOp.FindStringSubmatch(line); m != nil {
			ops = append(ops, op{m[1], m[2], m[4]})
		}
	}
	width := func(layer string) int64 { // the layer's width: its qkv kernel's input
		for name, s := range shapes {
			if strings.Contains(name, layer+"/TransformerLayer/MultiheadAttention/qkv_transform_single/kernel") {
				return s[len(s)-2]
			}
		}
		t.Fatalf("graph: no qkv kernel for %s", layer)
		return 0
	}
	var macs int64
	counted := 0
	for _, o := range ops {
		rows := int64(n)
		switch o.kind {
		case "BatchMatMul":
			layer := regexp.MustCompile(`Layer_\d+`).FindString(o.name)
			macs += int64(n) * int64(n) * width(layer)
		default:
			s, ok := shapes[o.in2]
			if !ok || len(s) < 2 {
				t.Fatalf("graph: %s reads %s, not a weight constant", o.name, o.in2)
			}
			if strings.Contains(o.name, "hidden_layers") {
				rows = 1
			}
			macs += rows * s[len(s)-2] * s[len(s)-1]
		}
		counted++
	}
	if counted != 14 {
		t.Fatalf("graph: %d matrix products, want 14 (6 MatMul, 4 Conv2D, 4 BatchMatMul)", counted)
	}
	return macs
}

// encoderMACs counts the multiply-adds our encoder performs for a text of n
// tokens, from its loaded matrices.
func encoderMACs(e *encoder, n int) int64 {
	mm := func(m matrix, rows int) int64 { return int64(rows) * int64(m.k) * int64(m.p) }
	var macs int64
	for i := range e.layers {
		l := &e.layers[i]
		if l.denseW.data != nil {
			macs += mm(l.denseW, n)
		}
		macs += mm(l.qkvW, n) + mm(l.outW, n) + mm(l.w1, n) + mm(l.w2, n)
		macs += 2 * int64(n) * int64(n) * int64(l.in) // QKᵀ and PV over all heads
	}
	return macs + mm(e.tanhW, 1)
}

// TestFLOPCount checks that the encoder does the reference graph's matrix
// work, no more and no less, so GFLOP/s figures computed from graphMACs
// describe the model.
func TestFLOPCount(t *testing.T) {
	u := testEncoder(t)
	for _, n := range []int{1, 8, 24, 60, 128} {
		g, e := graphMACs(t, n), encoderMACs(u.enc, n)
		if g != e {
			t.Errorf("%d tokens: graph %d multiply-adds, encoder %d", n, g, e)
		}
		t.Logf("%3d tokens: %.1f MFLOP (2 × %d multiply-adds)", n, 2*float64(g)/1e6, g)
	}
}
