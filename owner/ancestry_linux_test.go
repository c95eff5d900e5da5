package owner

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// childSignalAncestorsGroup runs in a session of its own (setsid, as a
// runner would start `setsid ownerjournal recover`) below a parent that is
// a member of the group OJ_LEADER leads, and tries to signal that group
// through a handle on the leader.
func childSignalAncestorsGroup() int {
	var res childResult
	leader, _ := strconv.Atoi(os.Getenv("OJ_LEADER"))
	if _, err := unix.Setsid(); err != nil {
		res.Err = "setsid: " + err.Error()
		return report(res)
	}
	if pg := syscall.Getpgrp(); pg == leader {
		res.Err = fmt.Sprintf("child still runs in group %d", pg)
		return report(res)
	}
	id, err := Of(leader)
	if err != nil {
		res.setErr(err)
		return report(res)
	}
	p, err := Open(id)
	if err != nil {
		res.setErr(fmt.Errorf("open: %w", err))
		return report(res)
	}
	defer p.Close()
	res.setErr(p.SignalGroup(syscall.SIGTERM))
	return report(res)
}

// TestSignalGroupRefusesAncestorsGroup: the caller is not in the target
// group, but its parent is (a pipeline member under job control that runs
// the recoverer under setsid). The group signal must be refused: it would
// kill the caller's own runner. On a build that refuses only the caller's
// own group, the parent dies of SIGTERM (status 143) and so does the leader.
func TestSignalGroupRefusesAncestorsGroup(t *testing.T) {
	leader := spawn(t, `ready up; read x || true`, spawnOpts{setpgid: true})
	leader.ready("up")
	exe, err := os.Executable()
	require.NoError(t, err)
	readyDir := testroot.Dir(t)
	// The parent is a shell in the leader's group that waits for the child.
	cmd := exec.Command("/bin/sh", "-c", `"$0" -test.run='^$'; exit $?`, exe)
	cmd.Env = append(os.Environ(), "OJ_TEST_CHILD=signal-ancestors-group", "OJ_TEST_READY_DIR="+readyDir, "OJ_LEADER="+strconv.Itoa(leader.pid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: leader.pid()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	b := testroot.WaitFile(t, filepath.Join(readyDir, "result"), cmd.Process.Pid)
	require.NoError(t, cmd.Wait(), "the parent in the group exits normally, not by SIGTERM: %s", stderr.String())
	res := decodeResult(t, b)
	assert.True(t, res.Refused, "result %+v", res)
	assert.Contains(t, res.Err, "an ancestor of the caller")
	require.NoError(t, leader.release(), "the leader was not signalled")
}

// TestAncestors: the lineage starts at the caller and reaches init through
// each parent.
func TestAncestors(t *testing.T) {
	pids, err := Ancestors()
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pids), 2)
	assert.Equal(t, os.Getpid(), pids[0])
	assert.Equal(t, os.Getppid(), pids[1])
	assert.Equal(t, 1, pids[len(pids)-1], "the walk ends at init")
}

// TestGroupAliveRefusesGroupOne: pgid 1 (or less) is no group to probe:
// kill(-1, 0) addresses every process the caller may signal.
func TestGroupAliveRefusesGroupOne(t *testing.T) {
	for _, pgid := range []int{1, 0, -1} {
		alive, err := GroupAlive(pgid)
		assert.ErrorIs(t, err, ErrUnverifiable, "pgid %d", pgid)
		assert.False(t, alive)
	}
}
