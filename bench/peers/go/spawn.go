package main

import (
	"sync"
	"sync/atomic"
	"time"
)

const batch = 1000

// benchSpawn measures an empty goroutine's spawn + sync.WaitGroup wait, one at
// a time (param join=each) and batch at a time (join=batch1000), with the
// default GOMAXPROCS. Every goroutine counts itself; the count is checked.
func benchSpawn() {
	n, took := measure(spawnEach, 1000, 1<<26)
	result("spawn", "join=each", float64(took.Nanoseconds())/float64(n), "ns/spawn")
	n, took = measure(spawnBatch, batch, 1<<26)
	result("spawn", "join=batch1000", float64(took.Nanoseconds())/float64(n), "ns/spawn")
}

func spawnEach(n int) time.Duration {
	var (
		wg  sync.WaitGroup
		ran atomic.Int64
	)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			ran.Add(1)
			wg.Done()
		}()
		wg.Wait()
	}
	took := time.Since(t0)
	if ran.Load() != int64(n) {
		fail("go spawn: %d of %d goroutines ran", ran.Load(), n)
	}
	return took
}

// spawnBatch runs n goroutines rounded up to whole batches and returns the
// time scaled back to n, so the harness's arithmetic stays per spawn.
func spawnBatch(n int) time.Duration {
	var (
		wg  sync.WaitGroup
		ran atomic.Int64
	)
	rounds := (n + batch - 1) / batch
	t0 := time.Now()
	for r := 0; r < rounds; r++ {
		wg.Add(batch)
		for i := 0; i < batch; i++ {
			go func() {
				ran.Add(1)
				wg.Done()
			}()
		}
		wg.Wait()
	}
	took := time.Since(t0)
	if ran.Load() != int64(rounds*batch) {
		fail("go spawn batch: %d of %d goroutines ran", ran.Load(), rounds*batch)
	}
	return time.Duration(float64(took) * float64(n) / float64(rounds*batch))
}
