package main

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// becomeSupervisor makes the process a child subreaper (prctl(2)
// PR_SET_CHILD_SUBREAPER), so daemonized descendants re-parent to it instead
// of init. The watch on the spawner (its pidfd and the supervisor's own
// parent-death signal) is set up earlier, by watchSpawner.
func becomeSupervisor() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return os.NewSyscallError("prctl(PR_SET_CHILD_SUBREAPER)", err)
	}
	return nil
}

// childAttr starts CMD in its own process group, with SIGKILL as its
// parent-death signal, and inside the cgroup from birth when there is one
// (clone3 CLONE_INTO_CGROUP).
func childAttr(cg *containment) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if fd, ok := cg.fd(); ok {
		a.UseCgroupFD, a.CgroupFD = true, fd
	}
	return a
}

// descendants walks /proc/PID/task/*/children from pid down. The error is
// the first failure to read some process's children other than its exit (a
// full descriptor table, EMFILE): the list is then incomplete, and an empty
// one proves nothing.
func descendants(pid int) ([]int, error) {
	var out []int
	var first error
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		cs, err := children(p)
		if err != nil && first == nil {
			first = err
		}
		for _, c := range cs {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out, first
}

func children(pid int) ([]int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	d, err := os.Open(dir)
	if err != nil {
		return nil, procErr(err)
	}
	tids, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, procErr(err)
	}
	var out []int
	for _, t := range tids {
		b, err := os.ReadFile(dir + "/" + t + "/children")
		if err != nil {
			if err = procErr(err); err != nil {
				return out, err
			}
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// procErr is nil for a /proc read that failed because the process or
// thread exited meanwhile, else err.
func procErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// reapIfChild reaps pid if it is an exited child of ours (an adopted
// descendant), without blocking.
func reapIfChild(pid int) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != unix.EINTR {
			return
		}
	}
}
