// Command gobench is the Go peer of weft's micro-benchmarks.
//
// Usage:
//
//	gobench yield      ns per runtime.Gosched with 2, 100 and 10 000 goroutines, GOMAXPROCS=1
//	gobench spawn      ns per goroutine spawn + sync.WaitGroup wait (one at a time, and in batches)
//	gobench pingpong   ns per round trip between two goroutines over two unbuffered channels
//	                   (GOMAXPROCS from the environment, printed as param gomaxprocs=P)
//	gobench ring --n N --threads T --rounds M
//	                   messages/s through T/N rings of N goroutines linked by channels
//	                   of capacity 1, M rounds (GOMAXPROCS from the environment; see ring.go)
//	gobench idlemem --threads T
//	                   bytes of resident memory and ns of creation per goroutine blocked on a
//	                   channel receive (see idlemem.go)
//	gobench httpd --root DIR [--port P]
//	                   a net/http static-file server for the HTTP section (see httpd.go)
//
// Output follows bench/common/bench.h: one
// "RESULT bench=... impl=go param=... value=... unit=..." line per
// measurement, "NOTE impl=go ..." lines for the report, and "FAIL ..." on
// stderr with exit status 1 when a run did not do what it was asked. A bad
// command line prints the usage on stderr and exits 2.
package main

import (
	"fmt"
	"os"
)

const usage = "usage: gobench yield|spawn|pingpong\n" +
	"       gobench ring --n N --threads T --rounds M\n" +
	"       gobench idlemem --threads T\n" +
	"       gobench httpd --root DIR [--port P]"

var commands = map[string]func(args []string){
	"yield":    noArgs(benchYield),
	"spawn":    noArgs(benchSpawn),
	"pingpong": noArgs(benchPingpong),
	"ring":     benchRing,
	"idlemem":  benchIdlemem,
	"httpd":    benchHttpd,
}

// noArgs adapts a benchmark that takes no options to the command table.
func noArgs(bench func()) func(args []string) {
	return func(args []string) {
		if len(args) != 0 {
			badUsage("unexpected argument %q", args[0])
		}
		bench()
	}
}

// badUsage reports a bad command line and exits 2.
func badUsage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gobench: "+format+"\n", args...)
	fmt.Fprintln(os.Stderr, usage)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	commands[os.Args[1]](os.Args[2:])
}
