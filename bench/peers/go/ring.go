package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// benchRing is the ring benchmark (one contract for weft and all its peers,
// bench/README.md): T goroutines form T/N rings of N, each reading from a
// chan int of capacity 1 (its inbox: the one-slot mailbox of the contract,
// where a send waits only while the slot is full, not for the receiver)
// and writing to its right neighbour's. In
// round r the goroutine with index r%N in its ring sends 1 and waits for the
// token to come back; the others add 1 and pass it on, so the originator must
// get N back. Rings run independently. GOMAXPROCS comes from the environment
// (the driver runs it with 1 and 2); there is no --workers.
//
// Timing (the one boundary of bench/README.md's ring contract): every
// goroutine is created first; each marks itself ready on a sync.WaitGroup and
// blocks in its first wait, the originator of round 0 of each ring on a start
// channel, the others on their inboxes. Main waits until all T are ready,
// starts the clock and closes the start channel. The goroutine that receives
// a ring's last message counts the ring done; the one that counts the last
// ring takes the end time and closes a done channel main waits on. Every
// goroutine then waits on a release channel instead of returning, so none
// exits inside the timed span. Untimed afterwards: main closes the release
// channel and waits (a second WaitGroup) for every goroutine to finish; every
// originator must have seen N in every round, every goroutine must have sent
// M messages and the total must be T*M; otherwise FAIL and exit 1. No
// warm-up: each goroutine has run once, up to its first wait, before the
// clock starts.
//
// A goroutine costs what Go makes it cost (a small growable stack and a
// channel). When the runtime cannot get memory it dies with "fatal error: out
// of memory" and exit status 2, which Go offers no way to catch, so there is
// no "LIMIT" exit here.
func benchRing(args []string) {
	n, threads, rounds := ringArgs(args)

	r := &ring{n: n, rounds: rounds, start: make(chan struct{}), done: make(chan struct{}),
		release: make(chan struct{})}
	r.ready.Add(threads)
	r.wg.Add(threads)
	r.ringsLeft.Store(int64(threads / n))
	for range threads / n {
		// Goroutine i reads from in and writes to the next one's inbox; the
		// last writes to the first's.
		first := make(chan int, 1)
		in := first
		for i := range n {
			out := first
			if i < n-1 {
				out = make(chan int, 1)
			}
			go r.member(i, in, out)
			in = out
		}
	}

	r.ready.Wait() // every goroutine is at its first wait
	t0 := time.Now()
	close(r.start)
	<-r.done
	took := r.end.Sub(t0)
	close(r.release) // untimed from here
	r.wg.Wait()

	messages := int64(threads) * int64(rounds)
	if w := r.wrong.Load(); w != 0 {
		fail("go ring: %d rounds ended with a wrong token at the originator (e.g. %d, want %d)",
			w, r.wrongValue.Load(), n)
	}
	if s := r.short.Load(); s != 0 {
		fail("go ring: %d of %d goroutines did not send %d messages", s, threads, rounds)
	}
	if s := r.sends.Load(); s != messages {
		fail("go ring: %d messages sent, want %d", s, messages)
	}
	secs := took.Seconds()
	result("ring", fmt.Sprintf("n=%d,threads=%d", n, threads), float64(messages)/secs, "msg/s")
	note("n=%d threads=%d rounds=%d seconds=%.6f messages=%d", n, threads, rounds, secs, messages)
}

// ring is what the goroutines of every ring share: the parameters, the
// gates, the end time, and the tallies checked afterwards.
type ring struct {
	n, rounds int
	ready     sync.WaitGroup // every goroutine, once it has started
	start     chan struct{}  // closed to start the clock
	ringsLeft atomic.Int64   // rings whose last message has not arrived yet
	end       time.Time      // taken by the goroutine that finished the last ring
	done      chan struct{}  // closed after end is set
	release   chan struct{}  // closed after the clock has stopped

	wg         sync.WaitGroup // every goroutine, once it has returned
	sends      atomic.Int64   // messages sent, all goroutines
	short      atomic.Int64   // goroutines that sent fewer or more than rounds
	wrong      atomic.Int64   // rounds whose originator got a token other than n
	wrongValue atomic.Int64   // one such token, for the message
}

// member runs goroutine i (0..n-1) of a ring: it receives from in and sends
// to out, originating the token in rounds r with r%n == i.
func (r *ring) member(i int, in <-chan int, out chan<- int) {
	defer r.wg.Done()
	r.ready.Done()
	if i == 0 {
		<-r.start // the originator of round 0
	}
	sent := 0
	for round := 0; round < r.rounds; round++ {
		if round%r.n == i {
			out <- 1
			sent++
			if v := <-in; v != r.n {
				r.wrong.Add(1)
				r.wrongValue.Store(int64(v))
			}
		} else {
			v := <-in
			out <- v + 1
			sent++
		}
	}
	if (r.rounds-1)%r.n == i && r.ringsLeft.Add(-1) == 0 { // it got the ring's last message
		r.end = time.Now()
		close(r.done)
	}
	<-r.release
	if sent != r.rounds {
		r.short.Add(1)
	}
	r.sends.Add(int64(sent))
}

// ringArgs parses "--n N --threads T --rounds M" and checks N >= 2, T a
// positive multiple of N and M >= 1; anything else is a usage error (exit 2).
func ringArgs(args []string) (n, threads, rounds int) {
	fs := flag.NewFlagSet("gobench ring", flag.ContinueOnError)
	fs.IntVar(&n, "n", 0, "threads per ring, >= 2")
	fs.IntVar(&threads, "threads", 0, "threads in all, a positive multiple of --n")
	fs.IntVar(&rounds, "rounds", 0, "rounds, >= 1")
	fs.Func("workers", "not accepted: Go takes its worker count from GOMAXPROCS", func(string) error {
		return fmt.Errorf("not supported: set GOMAXPROCS in the environment instead")
	})
	if err := fs.Parse(args); err != nil {
		os.Exit(2) // fs has printed the error and the options
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	bad := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "gobench ring: "+format+"\n", args...)
		fs.Usage()
		os.Exit(2)
	}
	switch {
	case fs.NArg() != 0:
		bad("unexpected argument %q", fs.Arg(0))
	case !given["n"] || !given["threads"] || !given["rounds"]:
		bad("--n, --threads and --rounds are all required")
	case n < 2:
		bad("--n must be >= 2, got %d", n)
	case threads <= 0 || threads%n != 0:
		bad("--threads must be a positive multiple of --n (%d), got %d", n, threads)
	case rounds < 1:
		bad("--rounds must be >= 1, got %d", rounds)
	case rounds > math.MaxInt64/threads:
		bad("--threads %d times --rounds %d overflows the message count", threads, rounds)
	}
	return n, threads, rounds
}
