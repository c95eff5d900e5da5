package owner

import (
	"errors"
	"fmt"
	"os"
)

// maxAncestry bounds a walk up the process tree (a loop in a corrupt or
// hostile /proc view must not hang it).
const maxAncestry = 4096

// ancestor is one process of the caller's lineage.
type ancestor struct {
	pid, pgid int
}

// lineage returns the calling process and its ancestors, nearest first,
// each with its process group. An ancestor that exits during the walk ends
// it (the caller was re-parented: the walk above it would be another
// lineage); any other failure to read one is an error, because a lineage
// that cannot be read cannot show that a group is free of it.
func lineage() ([]ancestor, error) {
	var out []ancestor
	for p := os.Getpid(); p > 0 && len(out) < maxAncestry; {
		info, err := readProc(p)
		if errors.Is(err, ErrGone) && len(out) > 0 {
			break
		}
		if err != nil {
			return out, fmt.Errorf("owner: ancestry of pid %d: %w", os.Getpid(), err)
		}
		out = append(out, ancestor{pid: p, pgid: info.pgid})
		if info.ppid == p {
			break
		}
		p = info.ppid
	}
	return out, nil
}

// Ancestors returns the PID of the calling process followed by the PIDs of
// its ancestors, nearest first, up to init. Recovery refuses any target that
// holds one of them: a process group, a cgroup. The lineage is read once; a
// process that re-parents the caller afterwards is not seen.
func Ancestors() ([]int, error) {
	l, err := lineage()
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(l))
	for i, a := range l {
		pids[i] = a.pid
	}
	return pids, nil
}

// refuseGroupOfAncestor returns an error wrapping [ErrRefused] if the caller
// or any of its ancestors is a member of process group pgid: a signal to
// the group would reach them (a runner in a recorded leader's pipeline that
// started the recoverer under setsid, say). A lineage that cannot be read is
// refused too.
func refuseGroupOfAncestor(pgid int) error {
	l, err := lineage()
	if err != nil {
		return fmt.Errorf("owner: process group %d: %w: %w", pgid, err, ErrRefused)
	}
	for i, a := range l {
		if a.pgid != pgid {
			continue
		}
		if i == 0 {
			return fmt.Errorf("owner: process group %d is the caller's own: %w", pgid, ErrRefused)
		}
		return fmt.Errorf("owner: process group %d holds pid %d, an ancestor of the caller: %w", pgid, a.pid, ErrRefused)
	}
	return nil
}
