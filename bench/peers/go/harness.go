package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// fail reports a benchmark that did not do what it was asked and exits 1.
func fail(format string, args ...any) {
	os.Stdout.Sync()
	fmt.Fprintf(os.Stderr, "FAIL "+format+"\n", args...)
	os.Exit(1)
}

func result(bench, param string, value float64, unit string) {
	fmt.Printf("RESULT bench=%s impl=go param=%s value=%.3f unit=%s\n", bench, param, value, unit)
}

func note(format string, args ...any) {
	fmt.Printf("NOTE impl=go "+format+"\n", args...)
}

// target is the timed run's intended length: BENCH_TARGET_MS, default 400 ms.
func target() time.Duration {
	if ms, err := strconv.Atoi(os.Getenv("BENCH_TARGET_MS")); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return 400 * time.Millisecond
}

// measure warms up run (doubling n from n0 until one run lasts 50 ms or n
// reaches maxIters), then does one timed run sized for target(). run(n)
// performs n iterations, checks them, and returns their duration. It returns
// the timed run's iteration count and duration.
func measure(run func(n int) time.Duration, n0, maxIters int) (int, time.Duration) {
	n := max(n0, 1)
	var took time.Duration
	for {
		took = run(n)
		if took >= 50*time.Millisecond || n >= maxIters {
			break
		}
		n *= 2
	}
	per := float64(max(took, 1)) / float64(n)
	timed := min(max(int(float64(target())/per), 1), maxIters)
	return timed, run(timed)
}
