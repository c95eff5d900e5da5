package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// helperKillFromBelow runs as a member of the group under test and starts
// the kill-group helper in the group OJ_CGROUP_TEST_OUTSIDE, which is not
// in that subtree: the killer is not a member, its parent (this process)
// is. It exits with the killer's status.
func helperKillFromBelow(path, outside string) int {
	fd, err := unix.Open(outside, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("open outside:", err)
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=kill-group", "OJ_CGROUP_TEST_PATH="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Println("killer:", err)
		return 4
	}
	return 0
}

// TestKillRefusesGroupOfAncestor: Kill from a process outside the group
// whose parent is inside it must refuse: the parent is the runner that
// started the recoverer. Were it not to refuse, the parent would die of
// SIGKILL and the helper's exit status would say so.
func TestKillRefusesGroupOfAncestor(t *testing.T) {
	_, g := newGroup(t)
	sub := subgroup(t, g.Path(), "sub")
	_, outside := newGroup(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=kill-from-below", "OJ_CGROUP_TEST_PATH="+g.Path(), "OJ_CGROUP_TEST_OUTSIDE="+outside.Path())
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: sub.FD()}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the member parent must survive: %s", out)
	assert.Contains(t, string(out), ErrContainsCaller.Error())
	assert.Contains(t, string(out), "an ancestor of the caller")
}
