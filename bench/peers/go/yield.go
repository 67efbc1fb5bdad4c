package main

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// benchYield measures runtime.Gosched with 2, 100 and 10 000 goroutines on
// one P (GOMAXPROCS=1; the driver also pins the process to CPU 0). The
// goroutines wait for a start signal, main takes the start time, and each
// yields n times counting handovers, which must be (nearly) all yields.
//
// The warm-up starts at n = 1000 yields per goroutine, fewer for many
// goroutines (at most 100 000 yields in all), so that the 10 000-goroutine
// row does not spend a second in its first warm-up run.
func benchYield() {
	runtime.GOMAXPROCS(1)
	note("GOMAXPROCS=%d", runtime.GOMAXPROCS(0))
	for _, g := range []int{2, 100, 10000} {
		n0 := max(min(1000, 100000/g), 1)
		n, took := measure(func(n int) time.Duration { return yieldRun(g, n) }, n0, (1<<30)/g)
		result("yield", fmt.Sprintf("threads=%d", g), float64(took.Nanoseconds())/float64(n*g), "ns/yield")
	}
}

func yieldRun(goroutines, n int) time.Duration {
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		last      atomic.Int64 // id of the goroutine that ran last
		handovers atomic.Int64
		done      atomic.Int64
	)
	last.Store(-1)
	wg.Add(goroutines)
	for id := int64(0); id < int64(goroutines); id++ {
		go func() {
			defer wg.Done()
			<-start
			var h int64
			for i := 0; i < n; i++ {
				runtime.Gosched()
				if last.Load() != id {
					last.Store(id)
					h++
				}
			}
			handovers.Add(h)
			done.Add(int64(n))
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(t0)

	total := int64(n) * int64(goroutines)
	if done.Load() != total {
		fail("go yield: %d yields done, %d asked", done.Load(), total)
	}
	// Goroutines still parked on the start channel cost a few non-switching
	// yields at the start; demand 90% rather than weft's near-100%.
	if h := handovers.Load(); float64(h) < 0.9*float64(total) {
		fail("go yield (%d goroutines): only %d of %d Gosched calls switched goroutine", goroutines, h, total)
	}
	return took
}
