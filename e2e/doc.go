// Package e2e holds the end-to-end tests that drive the Playwright project
// in testdata/playwright for real: `npm ci` from its lock file, then
// `npx playwright test` with two workers, each owning an e2e-server through
// `ownerjournal run` and creating tmux sessions over HTTP.
//
// The scenarios are a clean run, a worker SIGKILLed mid-test, the runner
// SIGKILLed (alone, and with its whole process group) followed by a run
// whose globalSetup recovers what it left, a user pressing Ctrl-C twice,
// and a teardown that retains something and so fails the run. After each
// one the tests check /proc and the filesystem directly: no process, socket
// or root is left, and bystanders (a developer's tmux server, an unrelated
// process, another live run's root) are untouched.
//
// The same scenarios (but the runner alone killed, the second Ctrl-C during
// teardown, the dying runner and the retaining teardown) drive the Jest and
// Vitest projects in testdata/jest and testdata/vitest (TestJest,
// TestVitest), which install the packed npm tarballs of `make npm` and run
// with no go and no ownerjournal on PATH; TestPacked covers the packages'
// bin and where the helper finds the binary.
//
// The tests are Linux-only (pidfd, inotify, /proc) and need node, npm, go
// and tmux; a missing one fails the tests, it never skips them. The package
// has no non-test code.
package e2e
