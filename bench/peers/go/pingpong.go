package main

import (
	"fmt"
	"runtime"
	"time"
)

// benchPingpong measures a round trip between two goroutines: main sends i on
// an unbuffered channel, the echo goroutine answers i+1 on a second one, and
// main checks every answer. GOMAXPROCS comes from the environment (1: both on
// one P, every hand-off a goroutine switch; 2: they may run on two threads)
// and is printed as param gomaxprocs=P. After the runs the echo goroutine's
// count of answers must equal the round trips main made.
func benchPingpong() {
	var (
		ping   = make(chan int)
		pong   = make(chan int)
		echoed = make(chan int) // the echo goroutine's count, once ping is closed
	)
	go func() {
		count := 0
		for v := range ping {
			pong <- v + 1
			count++
		}
		echoed <- count
	}()

	total := 0
	n, took := measure(func(n int) time.Duration {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			ping <- i
			if v := <-pong; v != i+1 {
				fail("go pingpong: sent %d, got back %d, want %d", i, v, i+1)
			}
		}
		took := time.Since(t0)
		total += n
		return took
	}, 1000, 1<<28)
	close(ping)
	if c := <-echoed; c != total {
		fail("go pingpong: the echo goroutine answered %d times, main made %d round trips", c, total)
	}
	result("pingpong", fmt.Sprintf("gomaxprocs=%d", runtime.GOMAXPROCS(0)),
		float64(took.Nanoseconds())/float64(n), "ns/roundtrip")
}
