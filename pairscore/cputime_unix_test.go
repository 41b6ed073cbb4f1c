//go:build unix

package pairscore_test

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time: on a machine shared with
// other work it measures the scorer's cost better than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
