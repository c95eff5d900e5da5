// Package owner identifies processes and signals them only after verifying
// that they are the process a record names.
//
// A PID alone is never an identity: PIDs are reused. An [Identity] is the PID
// together with the process start time, the boot id, the UID and the host
// name. [Check] turns an Identity into a [Verdict] (alive, dead or unknown),
// and [Open] returns a verified handle ([Process]) through which signals are
// sent and exit is awaited.
//
// Guarantees on Linux: [Open] obtains a pidfd (pidfd_open(2), Linux 5.3) first
// and verifies the identity afterwards, so a signal sent through the handle
// reaches the verified process or nobody, whatever happens to the PID in the
// meantime. A process group is signalled through the leader's pidfd with
// PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9). [Process.Wait] waits for POLLIN on
// the pidfd through the runtime poller: no sleep-polling.
//
// Caveats: on darwin there is no pidfd; a signal is sent with kill(2) right
// after a re-verification, and the window between the two is documented on
// [Process.Signal]. Exit is awaited with kqueue EVFILT_PROC. Other platforms
// return [errors.ErrUnsupported].
//
// A zombie is dead: it runs no code and holds no resources but its PID. A
// record from an earlier boot is dead by definition. Another host, a denied
// permission, an unreadable entry or an identity with a field missing
// ([Identity.Complete]) is unknown, never dead.
//
// Signals never reach the caller's lineage: [Open] refuses the caller and its
// ancestors, and [Process.SignalGroup] refuses a group that holds any of them
// ([ErrRefused]).
//
// PID namespaces (Linux): an [Identity] carries the PID namespace its PID
// is a number in (Identity.PIDNS, the inode of /proc/self/ns/pid). From an
// ancestor namespace the PID is translated through the NSpid lines of
// /proc/PID/status of the processes in that namespace and below it (found
// by /proc/PID/ns/pid and NS_GET_PARENT, ioctl_ns(2), Linux 4.9), and only
// a unique match that also passes every other check is believed; [Open]
// then holds the translated process. A namespace that cannot be seen from
// here (an ancestor or a sibling) is unknown; one with no process left is
// dead only for a caller in the initial namespace, which sees them all. A
// /proc that belongs to another PID namespace than the caller's is refused
// (every PID read there would name another process). Start times are read
// in the caller's time namespace: identities written in a time namespace
// with a boot-time offset do not match.
//
// All functions are safe for concurrent use.
package owner
