// Package cgroup contains a process tree in a cgroup v2 group of its own and
// ends the whole tree at once.
//
// `ownerjournal run` uses it where the process may create cgroups (delegated to
// it, or as root): [Detect] finds a writable cgroup v2 [Hierarchy],
// [Hierarchy.Create] makes a [Group], and the command is started with
// syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: g.FD()} so that it is a
// member from birth. A recoverer reopens the recorded path with [OpenGroup]
// and calls [Group.Kill], then [Group.Remove].
//
// Guarantees:
//
//   - Membership is inherited by every descendant and cannot be left by
//     setsid(2), double forks or re-parenting; only a process allowed to write
//     another group's cgroup.procs (root, or the owner of a delegated subtree)
//     can move a member out.
//   - A child started through [Group.FD] joins the group atomically in
//     clone3(2) (CLONE_INTO_CGROUP, Linux 5.7): it cannot fork before it is a
//     member.
//   - [Group.Kill] writes cgroup.kill (Linux 5.14), which SIGKILLs every
//     process of the group and of its descendant groups, including processes
//     forked while the kill runs. Without cgroup.kill it freezes the group,
//     SIGKILLs each member through a pidfd opened and then re-checked against
//     cgroup.procs (never a bare PID), and thaws. Either way it returns only
//     after cgroup.events reports "populated 0"; it waits with inotify, not by
//     sleeping, and honours its context.
//   - [Group.Kill] refuses a group that contains the calling process or
//     any of its ancestors ([ErrContainsCaller]): recovery never kills
//     itself nor the runner that started it.
//   - [Group.Remove] removes descendant groups deepest-first, attempts every
//     one even after a failure and reports all failures; a group that is
//     already gone is progress, not an error.
//   - [Detect] has no side effects: it creates nothing.
//   - [OpenGroup] accepts only an existing directory strictly inside a mounted
//     cgroup2 filesystem, verified with fstatfs(2) on the opened directory.
//
// Caveats:
//
//   - No controller is enabled: a group contains and kills, it does not limit
//     CPU or memory. Because no controller is enabled the "no internal
//     processes" rule does not apply, so groups may be created under the
//     caller's own cgroup while the caller stays in it.
//   - Processes in another PID namespace are not listed by [Group.Procs]; the
//     cgroup.kill path still kills them, the freeze fallback cannot.
//   - "populated" tracks live processes: a zombie member does not keep a group
//     populated (observed on Linux 6.18), so Kill does not wait for reaping.
//     Whoever is the members' parent still has to reap them.
//   - As root outside a delegated subtree, [Detect] still picks the caller's
//     own cgroup, for example a systemd unit's. systemd supports child
//     cgroups only in units with Delegate=yes; elsewhere it does not manage
//     them (stopping the unit still kills them, as they are in its subtree).
//   - A group's path is stable: cgroup v2 refuses rename(2) (EPERM). A
//     path may still be reused for a new group once the old one is removed;
//     an open Group works through its directory descriptor and never acts
//     on the newcomer.
//   - Only Linux has cgroups; on other systems every function returns an error
//     wrapping [ErrUnavailable] and [errors.ErrUnsupported].
//
// A [Group] is safe for concurrent use; [Group.Close] waits for calls in
// progress (a running Kill included) before it closes the directory.
package cgroup
