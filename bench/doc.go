// Package bench holds ownerjournal's Go benchmarks (`go test -bench . ./bench`)
// and, in cmd/benchdriver, the driver behind `make bench` that prints the
// project's figures as `bench: NAME = VALUE` lines. There are no tests here:
// nothing in this tree runs during `go test ./...` but compilation.
package bench
