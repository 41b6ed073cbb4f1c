//go:build linux

// Command fsyncloop appends a small record to a file and fdatasyncs it, at
// a fixed rate, and prints what each fsync cost this process in CPU time:
// the load that durable writes put on a machine besides the writes
// themselves (README, "Durable writes and key hits beside them"). Run it
// beside a key-hit load to see what fsyncs alone take from it:
//
//	go run ./bench/cmd/fsyncloop -rate 557 -d 6s -dir /var/lib/idem
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	rate := flag.Float64("rate", 600, "fsyncs per second")
	dur := flag.Duration("d", 10*time.Second, "how long")
	dir := flag.String("dir", os.TempDir(), "where the file goes (the disk to measure)")
	flag.Parse()
	if err := run(*rate, *dur, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "fsyncloop:", err)
		os.Exit(1)
	}
}

func run(rate float64, dur time.Duration, dir string) error {
	if rate <= 0 || dur <= 0 {
		return fmt.Errorf("-rate and -d must be positive")
	}
	f, err := os.CreateTemp(dir, "fsyncloop-*")
	if err != nil {
		return err
	}
	defer os.Remove(filepath.Clean(f.Name()))
	defer f.Close()
	record := make([]byte, 400)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		return err
	}
	start := time.Now()
	var n int
	var waited time.Duration
	for time.Since(start) < dur {
		<-tick.C
		t := time.Now()
		if _, err := f.Write(record); err != nil {
			return err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return err
		}
		waited += time.Since(t)
		n++
	}
	elapsed := time.Since(start)
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		return err
	}
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	fmt.Printf("%d fsyncs in %v (%.0f/s): %v each on average, %v of this process's CPU each\n",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), (waited / time.Duration(n)).Round(time.Microsecond), (cpu / time.Duration(n)).Round(time.Microsecond))
	return nil
}
