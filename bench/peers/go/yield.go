package main

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// benchYield measures runtime.Gosched with 2, 100 and 10 000 goroutines on
// one P (GOMAXPROCS=1; the driver also pins the process to CPU 0).
//
// Timing (the one boundary of every yield program, bench/README.md): each
// goroutine marks itself ready on a WaitGroup and waits on a start channel;
// main waits until all are ready, takes the start time and closes the
// channel. Each goroutine yields n times counting handovers (another
// goroutine ran since its last turn); the last one to finish takes the end
// time and closes a done channel, and every finished goroutine waits on a
// release channel instead of returning, so none exits inside the timed span.
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
		note("threads=%d: %d of %d Gosched calls switched goroutine (%.3f%%)", g,
			yieldLastSwitched, yieldLastTotal, 100*float64(yieldLastSwitched)/float64(yieldLastTotal))
	}
}

// The timed run's handovers, for the NOTE.
var yieldLastSwitched, yieldLastTotal int64

func yieldRun(goroutines, n int) time.Duration {
	var (
		ready, wg sync.WaitGroup
		start     = make(chan struct{})
		finished  = make(chan struct{}) // closed by the last goroutine to finish
		release   = make(chan struct{})
		end       time.Time
		running   atomic.Int64 // goroutines not yet done with their yields
		last      atomic.Int64 // id of the goroutine that ran last
		handovers atomic.Int64
		done      atomic.Int64
	)
	last.Store(-1)
	running.Store(int64(goroutines))
	ready.Add(goroutines)
	wg.Add(goroutines)
	for id := int64(0); id < int64(goroutines); id++ {
		go func() {
			defer wg.Done()
			ready.Done()
			<-start
			var h int64
			for i := 0; i < n; i++ {
				runtime.Gosched()
				if last.Load() != id {
					last.Store(id)
					h++
				}
			}
			if running.Add(-1) == 0 {
				end = time.Now()
				close(finished)
			}
			<-release // untimed from here
			handovers.Add(h)
			done.Add(int64(n))
		}()
	}
	ready.Wait()
	t0 := time.Now()
	close(start)
	<-finished
	took := end.Sub(t0)
	close(release)
	wg.Wait()

	total := int64(n) * int64(goroutines)
	if done.Load() != total {
		fail("go yield: %d yields done, %d asked", done.Load(), total)
	}
	// As bench/weft/yield.c: only the last yields, once the others have
	// finished, may find nobody to switch to (2 per goroutine allowed), plus
	// what Go's scheduler itself does: Gosched puts the goroutine on the
	// global run queue, and every 61st schedtick schedule() takes the head
	// of that queue before the P's local one (fairness, runtime/proc.go
	// findRunnable). With 2 goroutines the head is then, in some runs, the
	// goroutine that has just yielded: measured, 1 in 31 Gosched calls
	// (3.2%) does not switch in such a run, none in the others; with 100
	// goroutines up to 0.3% was seen (more than weft's 2 per goroutine),
	// with 10 000 none. Hence the extra total/30: what Go's scheduler does,
	// not a yield that failed to reach the scheduler.
	h := handovers.Load()
	yieldLastSwitched, yieldLastTotal = h, total
	if h+2*int64(goroutines)+total/30 < total {
		fail("go yield (%d goroutines): only %d of %d Gosched calls switched goroutine", goroutines, h, total)
	}
	return took
}
