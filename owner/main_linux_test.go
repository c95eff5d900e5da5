package owner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// TestMain dispatches the re-executed child processes. The test process is a
// child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER) so that the members of
// a process group whose leader exited re-parent to it, and the tests reap
// them instead of leaving zombies to PID 1.
func TestMain(m *testing.M) {
	if os.Getenv("OJ_TEST_CHILD") == "" {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "owner test: PR_SET_CHILD_SUBREAPER:", err)
			os.Exit(1)
		}
	}
	testroot.Main(m, map[string]func() int{
		"signal-own-group":       childSignalOwnGroup,
		"signal-ancestors-group": childSignalAncestorsGroup,
		"check-fixture":          childCheckFixture,
		"ns-holder":              childNSHolder,
		"ns-check":               childNSCheck,
		"ns-sleep":               childNSSleep,
		"ns-self":                childNSSelf,
	})
}

// childResult is what a child reports in its readiness file.
type childResult struct {
	Err        string `json:"err,omitempty"`
	Refused    bool   `json:"refused,omitempty"`
	Gone       bool   `json:"gone,omitempty"`
	Unverified bool   `json:"unverified,omitempty"`
	State      string `json:"state,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

func (c *childResult) setErr(err error) {
	if err == nil {
		return
	}
	c.Err = err.Error()
	c.Refused = errors.Is(err, ErrRefused)
	c.Gone = errors.Is(err, ErrGone)
	c.Unverified = errors.Is(err, ErrUnverifiable)
}

func report(res childResult) int {
	b, _ := json.Marshal(res)
	if err := testroot.Ready("result", b); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// childSignalOwnGroup runs inside the process group that OJ_LEADER leads
// (it is not the leader's descendant) and tries to signal that group through
// a handle on the leader.
func childSignalOwnGroup() int {
	var res childResult
	leader, _ := strconv.Atoi(os.Getenv("OJ_LEADER"))
	if syscall.Getpgrp() != leader {
		res.Err = fmt.Sprintf("child runs in group %d, not %d", syscall.Getpgrp(), leader)
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

// childCheckFixture runs as the unprivileged test user against the proc
// fixture OJ_PROC and reports Check and Of for the identity OJ_ID.
func childCheckFixture() int {
	var res childResult
	procRoot = os.Getenv("OJ_PROC")
	var id Identity
	if err := json.Unmarshal([]byte(os.Getenv("OJ_ID")), &id); err != nil {
		res.Err = err.Error()
		return report(res)
	}
	v := Check(id)
	res.State, res.Reason = v.State.String(), v.Reason
	_, err := Of(id.PID)
	res.setErr(err)
	return report(res)
}
