//go:build !unix

package pairscore_test

import "time"

// cpuTime is not measured on this platform; benchmarks report 0 cpu-µs/op.
func cpuTime() time.Duration { return 0 }
