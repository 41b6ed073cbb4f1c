package badger

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back (its
// size, its blocks), not its times: one journal commit fewer than fsync
// when only data changed.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
