package recover

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
)

const envTarget = "OJ_TARGET" // the starved terminator's target, as JSON

// starvedResult is what childStarved reports.
type starvedResult struct {
	Msgs    []string      `json:"msgs"`
	Err     string        `json:"err,omitempty"`
	Elapsed time.Duration `json:"elapsed"`
	Starved bool          `json:"starved"` // a dup failed with EMFILE before Terminate
}

// childStarved holds a pidfd on the target, then uses up every descriptor
// (so the duplicate a pidfd wait needs fails with EMFILE) and ends the
// target with Terminate and a 500 ms grace.
func childStarved() int {
	var id owner.Identity
	if err := json.Unmarshal([]byte(os.Getenv(envTarget)), &id); err != nil {
		return fail(err)
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 64, Max: 64}); err != nil {
		return fail(err)
	}
	p, err := owner.Open(id)
	if err != nil {
		return fail(err)
	}
	var res starvedResult
	var hold []int
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			res.Starved = err == unix.EMFILE
			break
		}
		hold = append(hold, fd)
	}
	t0 := time.Now()
	res.Msgs, err = Terminate(context.Background(), p, false, 500*time.Millisecond)
	res.Elapsed = time.Since(t0)
	if err != nil {
		res.Err = err.Error()
	}
	for _, fd := range hold {
		unix.Close(fd)
	}
	b, _ := json.Marshal(res)
	if err := testroot.Ready("result", b); err != nil {
		return fail(err)
	}
	return 0
}

// TestTerminateOutOfDescriptors: a terminator that cannot get a descriptor
// for its pidfd wait (EMFILE) still gives a SIGTERM-ignoring process its
// whole grace before SIGKILL, and says how long it really waited. Before,
// the failed wait counted as a timeout: SIGKILL came at once, logged as
// "still running after 500ms".
func TestTerminateOutOfDescriptors(t *testing.T) {
	t.Parallel()
	s := startSleeper(t, envIgnoreTerm+"=1")
	b, err := json.Marshal(s.ID)
	require.NoError(t, err)
	c := testroot.Start(t, "starved", envTarget+"="+string(b))
	var res starvedResult
	require.NoError(t, json.Unmarshal(c.WaitReady("result"), &res))
	require.True(t, res.Starved, "the child did not run out of descriptors")
	require.Empty(t, res.Err, "%v", res.Msgs)
	joined := strings.Join(res.Msgs, "; ")
	m := regexp.MustCompile(`SIGTERM to pid \d+: still running after (\S+) \(grace 500ms\)`).FindStringSubmatch(joined)
	require.NotNil(t, m, joined)
	measured, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	assert.GreaterOrEqual(t, measured, 500*time.Millisecond, "SIGKILL before the grace elapsed: %s", joined)
	assert.GreaterOrEqual(t, res.Elapsed, 500*time.Millisecond, joined)
	assert.Regexp(t, `SIGKILL to pid \d+: exited after`, joined)
	assert.Equal(t, owner.Dead, owner.Check(s.ID).State)
}
