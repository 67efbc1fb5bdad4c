package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// benchIdlemem is the "memory per idle thread" benchmark (bench/README.md;
// the C programs' side is bench/common/idlemem.h):
//
//	gobench idlemem --threads T
//
// T goroutines each block receiving from one shared unbuffered channel.
// Goroutines get Go's default: a small stack that grows (the runtime sizes
// the first one). GOMAXPROCS comes from the environment (the driver runs 1,
// pinned to CPU 0). Main allocates and touches its bookkeeping (a counter
// per goroutine), runs a GC, reads the resident set from /proc/self/statm,
// starts the clock and creates the T goroutines; each counts its arrival and
// blocks on the channel, the last to arrive records the time and tells main.
// Main reads the resident set again, closes the channel (which wakes them
// all), waits for them on a sync.WaitGroup and checks that each ran to
// completion exactly once.
//
//	RESULT bench=idlemem impl=go param=threads=<T> value=<B/thread> unit=B/thread
//	       create_ns=<ns/thread> rss_before=<B> rss_after=<B> vsz_per_thread=<B>
//	       stack_inuse_per_thread=<B>
//
// (stack_inuse_per_thread: runtime.MemStats.StackInuse growth ÷ T, the
// stack memory the runtime handed out, touched or not.) When the runtime
// cannot get memory it dies with "fatal error: out of memory" (exit 2),
// which Go offers no way to catch: there is no LIMIT exit here.
func benchIdlemem(args []string) {
	threads := 0
	for i := 0; i < len(args); i++ {
		val := ""
		switch {
		case args[i] == "--threads" && i+1 < len(args):
			i++
			val = args[i]
		case strings.HasPrefix(args[i], "--threads="):
			val = strings.TrimPrefix(args[i], "--threads=")
		default:
			badUsage("idlemem: unexpected argument %q", args[i])
		}
		t, err := strconv.Atoi(val)
		if err != nil || t < 1 || t > 100_000_000 {
			badUsage("idlemem: bad value for --threads: %q (want 1..10^8)", val)
		}
		threads = t
	}
	if threads == 0 {
		badUsage("idlemem: --threads: missing")
	}

	ran := make([]uint32, threads)
	for i := range ran { // touch it: a fresh span is zero but not resident
		ran[i] = 1
	}
	for i := range ran {
		ran[i] = 0
	}
	wake := make(chan struct{})
	allArrived := make(chan struct{})
	var arrived atomic.Int64
	var createNs atomic.Int64
	var wg sync.WaitGroup
	wg.Add(threads)
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)

	before := readStatm()
	t0 := time.Now()
	for i := range threads {
		go func() {
			if arrived.Add(1) == int64(threads) {
				createNs.Store(int64(time.Since(t0)))
				close(allArrived)
			}
			<-wake
			ran[i]++
			wg.Done()
		}()
	}
	<-allArrived
	after := readStatm()
	runtime.ReadMemStats(&ms1)

	for i := range ran {
		if ran[i] != 0 {
			fail("go idlemem: goroutine %d went past its receive before it was woken", i)
		}
	}
	close(wake)
	wg.Wait()
	wrong, first := 0, 0
	for i := range ran {
		if ran[i] != 1 {
			if wrong == 0 {
				first = i
			}
			wrong++
		}
	}
	if wrong != 0 {
		fail("go idlemem: %d of %d goroutines did not run to completion exactly once "+
			"(goroutine %d ran %d times)", wrong, threads, first, ran[first])
	}
	t := float64(threads)
	fmt.Printf("RESULT bench=idlemem impl=go param=threads=%d value=%.1f unit=B/thread "+
		"create_ns=%.1f rss_before=%d rss_after=%d vsz_per_thread=%.0f "+
		"stack_inuse_per_thread=%.0f\n",
		threads, (float64(after.rss)-float64(before.rss))/t, float64(createNs.Load())/t,
		before.rss, after.rss, (float64(after.vsz)-float64(before.vsz))/t,
		(float64(ms1.StackInuse)-float64(ms0.StackInuse))/t)
}

type statm struct{ vsz, rss uint64 }

// readStatm reads the virtual and resident sizes of the process in bytes.
func readStatm() statm {
	b, err := os.ReadFile("/proc/self/statm")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 2 {
		fail("go idlemem: cannot read /proc/self/statm: %v", err)
	}
	size, err1 := strconv.ParseUint(f[0], 10, 64)
	res, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		fail("go idlemem: bad /proc/self/statm: %q", string(b))
	}
	page := uint64(os.Getpagesize())
	return statm{size * page, res * page}
}
