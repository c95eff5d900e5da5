// Package recover replays a journal root: it classifies every record,
// terminates live orphans with verified signals, stops tmux servers behind
// recorded sockets, removes recorded paths and, last, removes the root once
// every recorded owner is verified dead.
//
// The package is deliberately named recover: it is the verb of the design.
// A file that imports it shadows the builtin recover, which this project's
// code never needs (library code does not panic); import it under another
// name if a file must use the builtin.
//
// Verdicts (see [Verdict]): in-use (owner alive), orphan (owner dead,
// subject alive), stale (both dead), unknown (cannot be verified: retained,
// never acted on) and corrupt (not believed: retained and reported).
//
// Guarantees:
//   - By default [Run] acts only on orphan and stale records: it is safe for
//     any participant at any time, and it is the daemon start-up step. With
//     [Options.All] it first marks the root closing and takes the exclusive
//     lock, so it waits for admitted creators, and then also ends what is in
//     use.
//   - Orphans are terminated concurrently: SIGTERM (to the process group where
//     one is recorded), up to [Options.Grace] for the exit, SIGKILL, up to the
//     grace again; exits are confirmed on the pidfd. N orphans cost about one
//     grace period, not N.
//   - A signal goes only through a handle verified against the recorded
//     identity, never to the recoverer or its ancestors. An identity is
//     judged in the PID namespace it was recorded in (see package owner); a
//     namespace this recoverer cannot see makes the record unknown.
//   - A recorded cgroup is killed only while the group at its path has the
//     recorded cgroup id and lies in a base this user may create groups
//     in; otherwise (a group made again by that name, a version 1 record
//     without an id) the record is retained with the reason.
//   - A socket is pinned once, as an O_PATH descriptor resolved beneath the
//     root with no symlink in any component; it must be a socket of ours
//     with one link (a hard link is refused and never connected to). Probes
//     and the tmux client (`tmux -S /proc/self/fd/3 kill-server`, under a
//     scrubbed environment and a 3 s timeout) reach it only through that
//     descriptor, and it is unlinked only when nothing answers any more and
//     its directory still holds that inode. Each distinct socket is handled
//     once per pass, in parallel; a stopped recorded tmux server is ended
//     through its verified handle rather than asked.
//   - Paths are removed deepest first, by descriptor (fstatat, openat with
//     O_NOFOLLOW, unlinkat on the parent after checking the inode), linear in
//     entries and depth; a symlink is removed itself, never followed, and a
//     tree swapped while it is removed is reported, not followed. Every error
//     is collected. ENOENT is progress.
//   - The root is removed last, under the exclusive lock, after a final
//     rescan finds nothing left; anything ambiguous keeps the root.
//   - A recovery is bounded by [Options.Deadline]: Wait (with All) + 4 ×
//     Grace + 10 s. Past it nothing new starts and pending waits end; what
//     is not verified gone is retained with the reason "deadline exceeded
//     after D". A step in flight at the deadline that does not take a
//     context (a socket probe, bounded by its own timeout) finishes first.
//     Signals to the recoverer never extend the deadline ([Guard] keeps
//     them from cutting a cleanup short).
//
// Caveats: members of a recorded process group that were not journaled
// individually are reached through the group leader's handle, which requires
// the leader to be alive when recovery opens it (Linux cannot open a pidfd on
// a dead leader). Escaped descendants (setsid daemons) are found only if a
// participant journaled them (ownerjournal run does, and so does a cgroup).
package recover
