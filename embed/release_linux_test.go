package embed

import (
	"bufio"
	"hash/crc32"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestReleaseLeavesTheModelReadable: after release, the model's pages
// outside the kept range leave the resident set, and the file still reads
// the same (a second encoder parses it as the first did).
func TestReleaseLeavesTheModelReadable(t *testing.T) {
	before := crc32.ChecksumIEEE(useLiteFile) // touches every page
	resident := mappingRSS(t, useLiteFile)
	keep := useLiteFile[len(useLiteFile)/2 : len(useLiteFile)/2+1<<20]
	release(useLiteFile, keep)
	after := mappingRSS(t, useLiteFile)
	want := int64(len(useLiteFile)-len(keep)) - 4*int64(os.Getpagesize())
	if resident-after < want {
		t.Errorf("release took %d bytes out of the resident set, want at least %d", resident-after, want)
	}
	if crc32.ChecksumIEEE(useLiteFile) != before {
		t.Fatal("the model file reads differently after release")
	}
	if _, err := NewUSE(DefaultUSEConfig()); err != nil {
		t.Fatalf("an encoder built after release: %v", err)
	}
}

// mappingRSS returns the resident bytes of the mapping that holds b, from
// /proc/self/smaps.
func mappingRSS(t *testing.T, b []byte) int64 {
	t.Helper()
	addr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := mappingRange(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); in && ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return 0
}

func mappingRange(line string) (lo, hi uint64, ok bool) {
	r, _, found := strings.Cut(line, " ")
	a, b, dash := strings.Cut(r, "-")
	if !found || !dash {
		return 0, 0, false
	}
	lo, err1 := strconv.ParseUint(a, 16, 64)
	hi, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return lo, hi, true
}
