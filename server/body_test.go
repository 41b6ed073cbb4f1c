package server

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadBody: a body reads whole whatever its declared length says and
// however the transport hands it over; a read error comes back; a body
// of the length it declares takes one allocation.
func TestReadBody(t *testing.T) {
	body := strings.Repeat(`{"k":"v"}`, 120) // 1,080 bytes, past io.ReadAll's first 512
	n := int64(len(body))
	cases := []struct {
		name     string
		r        io.Reader
		declared int64
	}{
		{"as declared", strings.NewReader(body), n},
		{"a byte at a time", iotest.OneByteReader(strings.NewReader(body)), n},
		{"with its last data", iotest.DataErrReader(strings.NewReader(body)), n},
		{"no length (chunked)", strings.NewReader(body), -1},
		{"declared shorter than it is", strings.NewReader(body), n / 3},
		{"declared past the limit", strings.NewReader(body), 1 << 40},
		{"declared longer than it is", strings.NewReader(body), 2 * n},
		{"declared past what is allocated ahead", strings.NewReader(body), presetBody + 1},
	}
	for _, c := range cases {
		got, err := readBody(c.r, c.declared, 1<<20)
		if err != nil || string(got) != body {
			t.Errorf("%s: %d bytes, %v; want the %d bytes", c.name, len(got), err, n)
		}
	}
	boom := errors.New("connection reset")
	if _, err := readBody(io.MultiReader(strings.NewReader(body[:100]), iotest.ErrReader(boom)), n, 1<<20); !errors.Is(err, boom) {
		t.Errorf("a body whose read fails: %v, want %v", err, boom)
	}
	raw := []byte(body)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := readBody(bytes.NewReader(raw), n, 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 { // the body, and bytes.NewReader's reader
		t.Errorf("reading a %d-byte body of that declared length took %.0f allocations, want 2", n, allocs)
	}
	// A client that declares the largest body and sends a few bytes gets
	// no more than presetBody allocated for it.
	got, err := readBody(strings.NewReader(body[:10]), 1<<20, 1<<20)
	if err != nil || len(got) != 10 || cap(got) > presetBody+1 {
		t.Errorf("a body declared 1 MiB that sends 10 bytes: %d bytes in %d allocated, %v; want at most %d allocated", len(got), cap(got), err, presetBody+1)
	}
	// One past presetBody still reads whole.
	long := strings.Repeat("x", presetBody+100)
	if got, err := readBody(iotest.HalfReader(strings.NewReader(long)), int64(len(long)), 1<<20); err != nil || string(got) != long {
		t.Errorf("a body past presetBody: %d of %d bytes, %v", len(got), len(long), err)
	}
}
