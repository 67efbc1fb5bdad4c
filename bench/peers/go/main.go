// Command gobench is the Go peer of weft's micro-benchmarks.
//
// Usage:
//
//	gobench yield   ns per runtime.Gosched with 2 and 100 goroutines, GOMAXPROCS=1
//	gobench spawn   ns per goroutine spawn + sync.WaitGroup wait (one at a time, and in batches)
//
// Output follows bench/common/bench.h: one
// "RESULT bench=... impl=go param=... value=... unit=..." line per
// measurement, "NOTE impl=go ..." lines for the report, and "FAIL ..." on
// stderr with exit status 1 when a run did not do what it was asked.
package main

import (
	"fmt"
	"os"
)

var commands = map[string]func(){
	"yield": benchYield,
	"spawn": benchSpawn,
}

func main() {
	if len(os.Args) != 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: gobench yield|spawn")
		os.Exit(2)
	}
	commands[os.Args[1]]()
}
