package embed

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// Names of the tensors the encoder reads, as model.json names them; see
// ../shared/data/use-lite/graph.txt for the graph that uses them.
const (
	pE = "module_apply_default/Encoder_en/KonaTransformer/Encode/"
	pT = pE + "TransformerStack/"
	pM = "module/Encoder_en/KonaTransformer/Encode/"

	tEmbeddings = "module/Embeddings_en"
	tTiming     = pT + "Layer_0/AddTimingSignal/TimingSignal/ExpandDims_1"
	tEps        = pT + "Layer_1/TransformerLayer/FFN/layer_prepostprocess/layer_norm/Cast/x"
	tMaxLen     = "module_apply_default/Encoder_en/KonaTransformer/ClipToMaxLength/Less/y"
	tTanhW      = "module/Encoder_en/hidden_layers/tanh_layer_0/weights"
	tTanhB      = "module/Encoder_en/hidden_layers/tanh_layer_0/bias"
	tL2Min      = "module_apply_default/Encoder_en/hidden_layers/l2_normalize/Maximum/y"
)

const (
	embDim    = 256  // token embedding width
	modelDim  = 512  // transformer width after layer 0, and output width
	ffnDim    = 1536 // feed-forward inner width
	numHeads  = 4
	maxTokens = 128 // the graph's ClipToMaxLength
)

// layer holds one transformer layer's weights (row-major, [in][out]).
type layer struct {
	in, heads, depth int
	scale            float32 // query scale, 1/sqrt(depth)
	lnScale, lnBias  []float32
	qkvW, qkvB       []float32 // [in][3*in]
	outW, outB       []float32 // [in][modelDim]
	denseW, denseB   []float32 // layer 0 only: residual projection [in][modelDim]
	ffnScale, ffnBias []float32
	w1, b1, w2, b2   []float32
}

// encoder is the loaded Universal Sentence Encoder Lite graph.
// It is immutable after load and safe for concurrent use.
type encoder struct {
	emb    []byte    // float16 [vocab][embDim], little-endian, into the embedded file
	nEmb   int       // rows of emb
	inv    []float32 // timing-signal frequencies [embDim/2]
	eps    float32
	l2min  float32
	maxLen int
	layers [2]layer
	tanhW  []float32
	tanhB  []float32
}

func loadEncoder(m *modelFile) (*encoder, error) {
	e := &encoder{}
	t, err := m.get(tEmbeddings, []int{8002, embDim})
	if err != nil {
		return nil, err
	}
	if t.f16 == nil {
		return nil, fmt.Errorf("%w: embeddings are not float16", ErrModel)
	}
	e.emb, e.nEmb = t.f16, t.shape[0]
	if e.inv, err = m.f32(tTiming, 1, embDim/2); err != nil {
		return nil, err
	}
	eps, err := m.scalar(tEps)
	if err != nil {
		return nil, err
	}
	e.eps = float32(eps)
	l2min, err := m.scalar(tL2Min)
	if err != nil {
		return nil, err
	}
	e.l2min = float32(l2min)
	maxLen, err := m.scalar(tMaxLen)
	if err != nil {
		return nil, err
	}
	if e.maxLen = int(maxLen); e.maxLen != maxTokens {
		return nil, fmt.Errorf("%w: max length %d, want %d", ErrModel, e.maxLen, maxTokens)
	}
	for i, in := range [2]int{embDim, modelDim} {
		if err := e.layers[i].load(m, i, in); err != nil {
			return nil, err
		}
	}
	if e.tanhW, err = m.f32(tTanhW, modelDim, modelDim); err != nil {
		return nil, err
	}
	if e.tanhB, err = m.f32(tTanhB, modelDim); err != nil {
		return nil, err
	}
	return e, nil
}

func (l *layer) load(m *modelFile, i, in int) error {
	L := fmt.Sprintf("Layer_%d/TransformerLayer/", i)
	l.in = in
	heads, err := m.scalar(pT + "Layer_1/TransformerLayer/MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/2")
	if err != nil {
		return err
	}
	l.heads = int(heads)
	depth, err := m.scalar(pT + L + "MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/3")
	if err != nil && i == 1 {
		return err
	}
	if i == 0 {
		depth = float64(in / l.heads) // Layer_0 folds its shape/3 the same way: in/heads
	}
	l.depth = int(depth)
	if l.heads != numHeads || l.heads*l.depth != in {
		return fmt.Errorf("%w: layer %d: %d heads of %d for width %d", ErrModel, i, l.heads, l.depth, in)
	}
	scale, err := m.scalar(pT + L + "MultiheadAttention/mul/y")
	if err != nil {
		return err
	}
	l.scale = float32(scale)
	get := func(dst *[]float32, name string, shape ...int) {
		if err != nil {
			return
		}
		*dst, err = m.f32(name, shape...)
	}
	get(&l.lnScale, pE+L+"layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat", in)
	get(&l.lnBias, pE+L+"layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat", in)
	get(&l.qkvW, pM+L+"MultiheadAttention/qkv_transform_single/kernel/part_0", 1, 1, in, 3*in)
	get(&l.qkvB, pE+L+"MultiheadAttention/qkv_transform_single/bias/ConcatPartitions/concat", 3*in)
	get(&l.outW, pM+L+"MultiheadAttention/output_transform_single/kernel/part_0", 1, 1, in, modelDim)
	get(&l.outB, pE+L+"MultiheadAttention/output_transform_single/bias/ConcatPartitions/concat", modelDim)
	if i == 0 {
		get(&l.denseW, pE+L+"dense/kernel/ConcatPartitions/concat", in, modelDim)
		get(&l.denseB, pE+L+"dense/bias/ConcatPartitions/concat", modelDim)
	}
	get(&l.ffnScale, pE+L+"FFN/layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat", modelDim)
	get(&l.ffnBias, pE+L+"FFN/layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat", modelDim)
	get(&l.w1, pT+L+"FFN/conv1/Tensordot/Reshape_1", modelDim, ffnDim)
	get(&l.b1, pE+L+"FFN/conv1/bias/ConcatPartitions/concat", ffnDim)
	get(&l.w2, pT+L+"FFN/conv2/Tensordot/Reshape_1", ffnDim, modelDim)
	get(&l.b2, pE+L+"FFN/conv2/bias/ConcatPartitions/concat", modelDim)
	return err
}

// workspace holds the scratch buffers of one forward pass.
type workspace struct {
	x, ln, qkv, ctx, y, h, scores []float32
}

func newWorkspace() *workspace {
	return &workspace{
		x:      make([]float32, maxTokens*modelDim),
		ln:     make([]float32, maxTokens*modelDim),
		qkv:    make([]float32, maxTokens*3*modelDim),
		ctx:    make([]float32, maxTokens*modelDim),
		y:      make([]float32, maxTokens*modelDim),
		h:      make([]float32, maxTokens*ffnDim),
		scores: make([]float32, maxTokens),
	}
}

// forward computes the L2-normalized embedding of ids (1..maxLen ids) into out.
func (e *encoder) forward(ws *workspace, ids []int, out []float32) {
	n := len(ids)
	// Embedding lookup with timing signal. The graph adds the scattered
	// lookup to (the gathered lookup + timing signal), so the embedding
	// counts twice.
	x := ws.x[:n*embDim]
	half := embDim / 2
	for i, id := range ids {
		row := x[i*embDim : (i+1)*embDim]
		src := e.emb[2*id*embDim : 2*(id+1)*embDim]
		for j := range row {
			v := float16.Frombits(binary.LittleEndian.Uint16(src[2*j:])).Float32()
			row[j] = v + v
		}
		p := float32(i)
		for j := 0; j < half; j++ {
			a := float64(p * e.inv[j])
			row[j] += float32(math.Sin(a))
			row[half+j] += float32(math.Cos(a))
		}
	}

	// Layer 0: width 256 in, 512 out; its residual is projected by dense.
	l := &e.layers[0]
	ln := ws.ln[:n*embDim]
	layerNorm(ln, x, l.lnScale, l.lnBias, embDim, e.eps)
	y := ws.y[:n*modelDim]
	matmulBias(y, x, l.denseW, l.denseB, n, embDim, modelDim)
	e.attention(ws, l, ln, y, n) // y += attention(ln)
	e.ffn(ws, l, y, n)            // y += ffn(ln(y))

	// Layer 1: width 512.
	l = &e.layers[1]
	ln = ws.ln[:n*modelDim]
	layerNorm(ln, y, l.lnScale, l.lnBias, modelDim, e.eps)
	e.attention(ws, l, ln, y, n)
	e.ffn(ws, l, y, n)

	// Mean pooling, tanh layer, L2 normalization.
	pooled := ws.ctx[:modelDim]
	clear(pooled)
	for i := 0; i < n; i++ {
		addTo(pooled, y[i*modelDim:(i+1)*modelDim])
	}
	inv := 1 / float32(max(n, 1))
	for j := range pooled {
		pooled[j] *= inv
	}
	matmulBias(out, pooled, e.tanhW, e.tanhB, 1, modelDim, modelDim)
	var ss float32
	for j, v := range out {
		t := float32(math.Tanh(float64(v)))
		out[j] = t
		ss += t * t
	}
	r := float32(1 / math.Sqrt(float64(max(ss, e.l2min))))
	for j := range out {
		out[j] *= r
	}
}

// attention adds the multi-head self-attention of ln ([n][l.in]) to res ([n][modelDim]).
func (e *encoder) attention(ws *workspace, l *layer, ln, res []float32, n int) {
	in := l.in
	qkv := ws.qkv[:n*3*in]
	matmulBias(qkv, ln, l.qkvW, l.qkvB, n, in, 3*in)
	ctx := ws.ctx[:n*in]
	clear(ctx)
	scores := ws.scores[:n]
	stride := 3 * in
	for h := 0; h < l.heads; h++ {
		qo, ko, vo := h*l.depth, in+h*l.depth, 2*in+h*l.depth
		for i := 0; i < n; i++ {
			q := qkv[i*stride+qo : i*stride+qo+l.depth]
			m := float32(math.Inf(-1))
			for j := 0; j < n; j++ {
				k := qkv[j*stride+ko : j*stride+ko+l.depth]
				s := dotScaled(q, k, l.scale)
				scores[j] = s
				m = max(m, s)
			}
			var sum float32
			for j := range scores {
				v := float32(math.Exp(float64(scores[j] - m)))
				scores[j] = v
				sum += v
			}
			c := ctx[i*in+h*l.depth : i*in+(h+1)*l.depth]
			for j := 0; j < n; j++ {
				axpy(c, qkv[j*stride+vo:j*stride+vo+l.depth], scores[j]/sum)
			}
		}
	}
	out := ws.x[:n*modelDim] // x is free after layer 0's inputs are consumed
	matmulBias(out, ctx, l.outW, l.outB, n, in, modelDim)
	addTo(res, out)
}

// ffn adds the feed-forward block of layer l, applied to ln(y), to y.
func (e *encoder) ffn(ws *workspace, l *layer, y []float32, n int) {
	ln := ws.ln[:n*modelDim]
	layerNorm(ln, y, l.ffnScale, l.ffnBias, modelDim, e.eps)
	h := ws.h[:n*ffnDim]
	matmulBias(h, ln, l.w1, l.b1, n, modelDim, ffnDim)
	for i, v := range h {
		if v < 0 {
			h[i] = 0
		}
	}
	out := ws.x[:n*modelDim]
	matmulBias(out, h, l.w2, l.b2, n, ffnDim, modelDim)
	addTo(y, out)
}

// layerNorm normalizes each row of x ([rows][d]) into dst.
func layerNorm(dst, x, scale, bias []float32, d int, eps float32) {
	for off := 0; off < len(x); off += d {
		row := x[off : off+d]
		var mean float32
		for _, v := range row {
			mean += v
		}
		mean /= float32(d)
		var vr float32
		for _, v := range row {
			dv := v - mean
			vr += dv * dv
		}
		vr /= float32(d)
		r := float32(1 / math.Sqrt(float64(vr+eps)))
		o := dst[off : off+d]
		for j, v := range row {
			o[j] = scale[j]*r*(v-mean) + bias[j]
		}
	}
}

func dotScaled(q, k []float32, scale float32) float32 {
	var s float32
	for i, v := range q {
		s += v * scale * k[i]
	}
	return s
}
