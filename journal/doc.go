// Package journal keeps the owner records of one run in a private runtime
// directory, the root.
//
// A root is a directory owned by the effective UID with mode 0700. [Open]
// refuses a root (or a default base, see [DefaultBase]) that is a symlink,
// is owned by another user or is accessible to group or others; it never
// repairs one. Resolve once, act through the descriptor: Open walks the
// root's path from "/" once, refusing a directory on it that another user
// owns or that group or others may write without the sticky bit, and keeps
// the root and its parent open. Every later step (lock, admissions, leases,
// records, the closing marker, the tombstone rename and the final rmdir)
// goes through those descriptors, never the path. A name inside the root is
// resolved by [Root.OpenParent]: openat2(2) with RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV (Linux 5.6+),
// else a per-component O_NOFOLLOW walk: no symlink in any component, no mount
// crossing. The process's working directory is never changed.
//
// Layout of a root:
//
//	lock       flock(2): shared for admissions, exclusive for teardown
//	closing    marker: present once teardown has begun
//	records/   one JSON file per owned subject, <id>.json
//	leases/    one file per live participant, exclusively flocked, named
//	           <pid>-<starttime>-<pidns>-<bootid>: a lease of another boot
//	           never stands for a current participant
//	...        sockets and scratch paths the records name
//
// Records are versioned: version 2 (written now) adds the PID namespace of
// every identity and the cgroup id; version 1 records are still read.
//
// Guarantees: a record is published atomically (temp file in records/,
// fsync, rename, fsync of records/; [renameio]), so it is never visible
// half-written under its final name. A writer killed mid-publish leaves at
// most a temp file whose name carries the writer's identity. A record is
// believed only after the file checks of [Root.Scan] and strict decoding;
// anything else is reported as a [CorruptError] and never acted on.
// Strict decoding includes what a record must prove: every identity in it is
// complete ([owner.Identity.Complete]: a missing boot id or start time is
// never read as "dead"), a pgid is the subject's PID and above 1, and every
// string is valid UTF-8 without control characters. Invalid UTF-8 and lone
// surrogate escapes are refused before encoding/json could turn them into
// U+FFFD, which would name another file.
//
// Creation gate: resources are created inside an [Admission] (a shared lock
// on the root's lock file). Teardown marks the root closing, then takes the
// exclusive lock, which waits for every admitted creator; new admissions then
// fail with [ErrClosing].
//
// Ownership from birth: [Create] returns a root with the calling process's
// [Lease] already held, so recovery by any other participant keeps it while
// its creator lives; a root opened with [Open] is protected from the moment
// its user calls [Root.Lease]. A daemon starts in this order: Create (or Open
// and Lease), then orphans-only recovery of what dead predecessors left
// (recover.Run keeps a root its caller leases), then admissions and
// publishing.
//
// Caveats: rename is not atomic on NFS, and flock(2) is advisory and may be
// emulated on network filesystems: a root belongs on a local filesystem
// (the defaults, $XDG_RUNTIME_DIR and /tmp, are). Lock and lease files are
// opened beneath the root's descriptor (O_NOFOLLOW) and flocked there, then
// checked to still be the entry of their directory. [Root.Dir] is an
// [os.Root] on the same directory, which follows a symlink in the middle of
// a path as long as it stays inside the root: code that acts on names
// someone else may change resolves them with [Root.OpenParent] instead.
// Without openat2 the walk compares st_dev, so a bind mount of the same
// filesystem is not detected there.
//
// A *Root is safe for concurrent use by multiple goroutines.
package journal
