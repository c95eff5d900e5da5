// Command benchdriver measures ownerjournal end to end and prints one line
// per figure:
//
//	bench: NAME = VALUE (details)
//
// Ratios divide our time by a floor or a baseline measured in the same run on
// the same machine: the least the same work needs without ownerjournal
// (renameio.WriteFile and a directory fsync; reading or unlinking the same
// files), npm tree-kill on the same process tree, or a sequential reaper that
// polls every 25 ms as the first seed document's code does. Lower is better.
// The targets are aims, not assertions; see bench/README.md.
//
// Usage (from the repository root, after `go build -o bin/ ./cmd/...` and
// `npm ci` in bench/node):
//
//	benchdriver [-ownerjournal bin/ownerjournal] [-node bench/node] [-e2e-server bin/e2e-server] [-testdata testdata] [-run REGEXP]
//
// It re-executes itself for helper processes (concurrent publishers, the
// owner of orphans), selected by the OJBENCH_HELPER environment variable.
// It leaves nothing behind: every root is removed and every process it
// started is ended and confirmed gone. A missing prerequisite (the
// ownerjournal binary, node, npm tree-kill, strace, ps) fails the run.
package main
