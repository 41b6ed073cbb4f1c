package embed

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/viterin/vek/vek32"
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

// layer holds one transformer layer's weights, the matrices ([in][out])
// packed for the encoder's kernel.
type layer struct {
	in, heads, depth  int
	scale             float32 // query scale, 1/sqrt(depth)
	lnScale, lnBias   []float32
	qkvW              matrix // [in][3*in]
	outW              matrix // [in][modelDim]
	denseW            matrix // layer 0 only: residual projection [in][modelDim]
	w1, w2            matrix // [modelDim][ffnDim], [ffnDim][modelDim]
	qkvB, outB        []float32
	denseB, b1, b2    []float32
	ffnScale, ffnBias []float32
}

// encoder is the loaded Universal Sentence Encoder Lite graph.
// It is immutable after load and safe for concurrent use.
type encoder struct {
	emb    []byte    // float16 [vocab][embDim], little-endian, into the embedded file
	nEmb   int       // rows of emb
	inv    []float32 // timing-signal frequencies [embDim/2]
	timing []float32 // timing signal [maxTokens][embDim], from inv
	eps    float32
	l2min  float32
	maxLen int
	layers [2]layer
	tanhW  matrix
	tanhB  []float32
}

func loadEncoder(m *modelFile, kern kernel) (*encoder, error) {
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
	half := embDim / 2
	e.timing = make([]float32, maxTokens*embDim)
	for i := 0; i < maxTokens; i++ {
		p := float32(i)
		for j := 0; j < half; j++ {
			a := float64(p * e.inv[j]) // float32 product, as the graph's Mul
			e.timing[i*embDim+j] = float32(math.Sin(a))
			e.timing[i*embDim+half+j] = float32(math.Cos(a))
		}
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
		if err := e.layers[i].load(m, kern, i, in); err != nil {
			return nil, err
		}
	}
	w, err := m.f32(tTanhW, modelDim, modelDim)
	if err != nil {
		return nil, err
	}
	e.tanhW = packMatrix(kern, w, modelDim, modelDim)
	if e.tanhB, err = m.f32(tTanhB, modelDim); err != nil {
		return nil, err
	}
	return e, nil
}

func (l *layer) load(m *modelFile, kern kernel, i, in int) error {
	L := fmt.Sprintf("Layer_%d/TransformerLayer/", i)
	l.in = in
	// The head count is stored once (Layer_1's split shape); both layers
	// use it. Each layer stores its own head depth.
	heads, err := m.scalar(pT + "Layer_1/TransformerLayer/MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/2")
	if err != nil {
		return err
	}
	l.heads = int(heads)
	depth, err := m.scalar(pT + L + "MultiheadAttention/split_heads/split_last_dimension/Reshape/shape/3")
	if err != nil {
		return err
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
	getM := func(dst *matrix, name string, shape ...int) {
		var w []float32
		if get(&w, name, shape...); err == nil {
			*dst = packMatrix(kern, w, shape[len(shape)-2], shape[len(shape)-1])
		}
	}
	get(&l.lnScale, pE+L+"layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat", in)
	get(&l.lnBias, pE+L+"layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat", in)
	getM(&l.qkvW, pM+L+"MultiheadAttention/qkv_transform_single/kernel/part_0", 1, 1, in, 3*in)
	get(&l.qkvB, pE+L+"MultiheadAttention/qkv_transform_single/bias/ConcatPartitions/concat", 3*in)
	getM(&l.outW, pM+L+"MultiheadAttention/output_transform_single/kernel/part_0", 1, 1, in, modelDim)
	get(&l.outB, pE+L+"MultiheadAttention/output_transform_single/bias/ConcatPartitions/concat", modelDim)
	if i == 0 {
		getM(&l.denseW, pE+L+"dense/kernel/ConcatPartitions/concat", in, modelDim)
		get(&l.denseB, pE+L+"dense/bias/ConcatPartitions/concat", modelDim)
	}
	get(&l.ffnScale, pE+L+"FFN/layer_prepostprocess/layer_norm/layer_norm_scale/ConcatPartitions/concat", modelDim)
	get(&l.ffnBias, pE+L+"FFN/layer_prepostprocess/layer_norm/layer_norm_bias/ConcatPartitions/concat", modelDim)
	getM(&l.w1, pT+L+"FFN/conv1/Tensordot/Reshape_1", modelDim, ffnDim)
	get(&l.b1, pE+L+"FFN/conv1/bias/ConcatPartitions/concat", ffnDim)
	getM(&l.w2, pT+L+"FFN/conv2/Tensordot/Reshape_1", ffnDim, modelDim)
	get(&l.b2, pE+L+"FFN/conv2/bias/ConcatPartitions/concat", modelDim)
	return err
}

// workspace holds the scratch buffers of one model call; it grows to the
// largest batch it has run.
type workspace struct {
	rows, texts           int
	x, ln, qkv, ctx, y, h []float32 // [rows][·]
	pooled, tout          []float32 // [texts][modelDim]
	q, k, v, ch, p        []float32 // one head of one text: queries, keys, values, context; probabilities
}

func newWorkspace() *workspace {
	ws := &workspace{
		q:  make([]float32, maxTokens*modelDim/numHeads),
		k:  make([]float32, maxTokens*modelDim/numHeads),
		v:  make([]float32, maxTokens*modelDim/numHeads),
		ch: make([]float32, maxTokens*modelDim/numHeads),
		p:  make([]float32, maxTokens*maxTokens),
	}
	ws.grow(maxTokens, 1)
	return ws
}

// grow makes room for a batch of rows token rows in texts texts.
func (ws *workspace) grow(rows, texts int) {
	if rows > ws.rows {
		ws.rows = rows
		ws.x = make([]float32, rows*modelDim)
		ws.ln = make([]float32, rows*modelDim)
		ws.qkv = make([]float32, rows*3*modelDim)
		ws.ctx = make([]float32, rows*modelDim)
		ws.y = make([]float32, rows*modelDim)
		ws.h = make([]float32, rows*ffnDim)
	}
	if texts > ws.texts {
		ws.texts = texts
		ws.pooled = make([]float32, texts*modelDim)
		ws.tout = make([]float32, texts*modelDim)
	}
}

// forward computes the L2-normalized embeddings of seqs (each of 1..maxLen
// ids) into out, in one pass over the weights: the texts' token rows are
// stacked for the dense layers, and attention runs text by text. A text's
// vector is bit-identical whatever it is batched with. ctx is checked
// before and between layers.
func (e *encoder) forward(ctx context.Context, ws *workspace, seqs [][]int, out [][]float32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rows := 0
	for _, s := range seqs {
		rows += len(s)
	}
	ws.grow(rows, len(seqs))
	// Embedding lookup with timing signal. The graph adds the scattered
	// lookup to (the gathered lookup + timing signal), so the embedding
	// counts twice.
	x := ws.x[:rows*embDim]
	r := 0
	for _, ids := range seqs {
		for i, id := range ids {
			row := x[r*embDim : (r+1)*embDim]
			src := e.emb[2*id*embDim : 2*(id+1)*embDim]
			ts := e.timing[i*embDim : (i+1)*embDim]
			for j := range row {
				v := float16.Frombits(binary.LittleEndian.Uint16(src[2*j:])).Float32()
				row[j] = v + v + ts[j]
			}
			r++
		}
	}

	// Layer 0: width 256 in, 512 out; its residual is projected by dense.
	l := &e.layers[0]
	ln := ws.ln[:rows*embDim]
	layerNorm(ln, x, l.lnScale, l.lnBias, embDim, e.eps)
	y := ws.y[:rows*modelDim]
	l.denseW.mulBias(y, x, l.denseB, rows, false)
	if err := ctx.Err(); err != nil {
		return err
	}
	e.attention(ws, l, ln, y, seqs) // y += attention(ln)
	if err := ctx.Err(); err != nil {
		return err
	}
	e.ffn(ws, l, y, rows) // y += ffn(ln(y))
	if err := ctx.Err(); err != nil {
		return err
	}

	// Layer 1: width 512.
	l = &e.layers[1]
	ln = ws.ln[:rows*modelDim]
	layerNorm(ln, y, l.lnScale, l.lnBias, modelDim, e.eps)
	e.attention(ws, l, ln, y, seqs)
	if err := ctx.Err(); err != nil {
		return err
	}
	e.ffn(ws, l, y, rows)

	// Mean pooling, tanh layer, L2 normalization.
	pooled := ws.pooled[:len(seqs)*modelDim]
	clear(pooled)
	r = 0
	for b, ids := range seqs {
		pb := pooled[b*modelDim : (b+1)*modelDim]
		for range ids {
			addTo(pb, y[r*modelDim:(r+1)*modelDim])
			r++
		}
		inv := 1 / float32(max(len(ids), 1))
		for j := range pb {
			pb[j] *= inv
		}
	}
	tout := ws.tout[:len(seqs)*modelDim]
	e.tanhW.mulBias(tout, pooled, e.tanhB, len(seqs), false)
	for b, o := range out {
		var ss float32
		for j, v := range tout[b*modelDim : (b+1)*modelDim] {
			t := float32(math.Tanh(float64(v)))
			o[j] = t
			ss += t * t
		}
		r := float32(1 / math.Sqrt(float64(max(ss, e.l2min))))
		for j := range o {
			o[j] *= r
		}
	}
	return nil
}

// attention adds the multi-head self-attention of ln ([rows][l.in]) to res
// ([rows][modelDim]); each text of seqs attends to its own rows only.
func (e *encoder) attention(ws *workspace, l *layer, ln, res []float32, seqs [][]int) {
	in, d := l.in, l.depth
	rows := len(res) / modelDim
	qkv := ws.qkv[:rows*3*in]
	l.qkvW.mulBias(qkv, ln, l.qkvB, rows, false)
	ctx := ws.ctx[:rows*in]
	stride := 3 * in
	off := 0
	for _, ids := range seqs {
		n := len(ids)
		tq := qkv[off*stride : (off+n)*stride]
		tc := ctx[off*in : (off+n)*in]
		off += n
		q, k, v, ch, p := ws.q[:n*d], ws.k[:n*d], ws.v[:n*d], ws.ch[:n*d], ws.p[:n*n]
		for h := 0; h < l.heads; h++ {
			for i := 0; i < n; i++ {
				row := tq[i*stride : (i+1)*stride]
				copy(q[i*d:(i+1)*d], row[h*d:(h+1)*d])
				copy(k[i*d:(i+1)*d], row[in+h*d:in+(h+1)*d])
				copy(v[i*d:(i+1)*d], row[2*in+h*d:2*in+(h+1)*d])
			}
			vek32.MulNumber_Inplace(q, l.scale)
			for i := 0; i < n; i++ {
				qi := q[i*d : (i+1)*d]
				pi := p[i*n : (i+1)*n]
				m := float32(math.Inf(-1))
				for j := 0; j < n; j++ {
					s := vek32.Dot(qi, k[j*d:(j+1)*d])
					pi[j] = s
					m = max(m, s)
				}
				var sum float32
				for j, s := range pi {
					ex := float32(math.Exp(float64(s - m)))
					pi[j] = ex
					sum += ex
				}
				vek32.MulNumber_Inplace(pi, 1/sum)
			}
			vek32.MatMul_Into(ch, p, v, n)
			for i := 0; i < n; i++ {
				copy(tc[i*in+h*d:i*in+(h+1)*d], ch[i*d:(i+1)*d])
			}
		}
	}
	out := ws.x[:rows*modelDim] // x is free once layer 0's inputs are consumed
	l.outW.mulBias(out, ctx, l.outB, rows, false)
	addTo(res, out)
}

// ffn adds the feed-forward block of layer l, applied to ln(y), to y.
func (e *encoder) ffn(ws *workspace, l *layer, y []float32, n int) {
	ln := ws.ln[:n*modelDim]
	layerNorm(ln, y, l.ffnScale, l.ffnBias, modelDim, e.eps)
	h := ws.h[:n*ffnDim]
	l.w1.mulBias(h, ln, l.b1, n, true) // bias and ReLU fused
	out := ws.x[:n*modelDim]
	l.w2.mulBias(out, h, l.b2, n, false)
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
