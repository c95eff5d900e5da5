// Package reliability holds the project's reliability and security suite; it
// has no code of its own, only tests (reliability_*_linux_test.go).
//
// TestReliability runs seven parts against real processes, real signals, real
// tmux servers and real file permissions:
//
//  1. crash matrix: a participant (worker, publisher, `ownerjournal run`
//     supervisor, recoverer, e2e-server) is SIGKILLed at every marked stage;
//     the next recoverer must leave no process, socket or directory behind
//     and no bystander (a tmux server on a private socket, an unrelated
//     process, a file outside the root) touched;
//  2. PID reuse: records whose start time, boot id or UID do not match the
//     live process with that PID; no signal may reach it;
//  3. hostile inputs: unsafe bases, roots, records, sockets, paths and a
//     TMUX variable, and hostile writers (an in-root symlink in a recorded
//     path, a hard-linked socket, a root under another user's directory, a
//     mistyped root), each refused with a message naming the path and why;
//  4. fuzzing of every fuzz target of the module (go test -fuzz), plus an
//     in-process mutation run of the record decoder;
//  5. a soak of 8 publishers and 4 recoverers on one root;
//  6. SIGINT/SIGTERM storms delivered while cleanup runs;
//  7. faults (faults_linux_test.go): a full disk, one free page, an
//     inode-full or read-only root (real tmpfs mounts, remounted read-only),
//     RLIMIT_NOFILE 20–24 set in a re-executed helper, an intent whose owner
//     was SIGKILLed; no recovery may claim a clean end (exit 0 or "root
//     removed") while a recorded or descended process lives.
//
// The test binary's last line is
//
//	reliability: S scenarios, L leaked, W wrongly signalled, P panics, R/H hostile inputs refused, F faults injected, C false clean
//
// The counts and durations are flags of the test binary; the defaults are the
// short form that `go test ./...` runs (well under a minute). The full form:
//
//	go test -c -o bin/reliability.test ./reliability
//	bin/reliability.test -test.run '^TestReliability$' -test.timeout 30m -full
//
// W counts signals that reached a process that no record named (helpers
// record every catchable signal they get) and bystanders touched; L counts
// processes (found by an environment tag in /proc/*/environ), sockets and
// directories left after the last recoverer; P counts failing fuzz runs and
// decoder panics; C counts fault cases whose recovery claimed a clean end
// while something it should have ended lived.
package reliability
