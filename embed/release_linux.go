package embed

import (
	"os"
	"syscall"
	"unsafe"
)

// release tells the kernel that the pages of data outside keep (a
// sub-slice of data) are not needed for now: the model file's raw bytes of
// the tensors widened into the heap at load, read once. data is the model
// embedded in the binary, a private mapping of the executable: the pages
// leave the resident set (about 10 MB of the 14 MB file), and a later read
// (another encoder built) faults them in again from the file, unchanged.
// Only whole pages inside data are released, so nothing beside it is.
func release(data, keep []byte) {
	if len(data) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	base := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
	from, to := base, base+uintptr(len(data))
	cut := func(lo, hi uintptr) {
		lo, hi = (lo+page-1)&^(page-1), hi&^(page-1)
		if lo < hi {
			// Advice only: if the kernel refuses, the pages stay resident.
			_ = syscall.Madvise(data[lo-base:hi-base], syscall.MADV_DONTNEED)
		}
	}
	if len(keep) == 0 {
		cut(from, to)
		return
	}
	k := uintptr(unsafe.Pointer(unsafe.SliceData(keep)))
	cut(from, k)
	cut(k+uintptr(len(keep)), to)
}
