//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "benchdriver: the benchmarks need Linux (pidfds, /proc, subreapers)")
	os.Exit(1)
}
