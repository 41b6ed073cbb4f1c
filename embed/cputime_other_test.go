//go:build !unix

package embed

import "time"

// cpuTime is not measured on this platform; benchmarks report 0 cpu-ms/op.
func cpuTime() time.Duration { return 0 }
