package owner

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// shPrelude defines ready NAME [DATA]: publish a readiness file atomically.
const shPrelude = `ready() { printf '%s' "$2" > "$DIR/.$1"; mv "$DIR/.$1" "$DIR/$1"; }; `

// proc is a /bin/sh child of the test process.
type proc struct {
	t     *testing.T
	cmd   *exec.Cmd
	dir   string
	stdin io.WriteCloser
	group bool
}

type spawnOpts struct {
	cred    *syscall.Credential
	setpgid bool // lead a new process group
}

// spawn starts script under /bin/sh with $DIR set to a private directory for
// readiness files. At cleanup the process (its group, if it leads one) is
// SIGKILLed and reaped.
func spawn(t *testing.T, script string, o spawnOpts) *proc {
	t.Helper()
	dir := testroot.Dir(t)
	cmd := exec.Command("/bin/sh", "-c", shPrelude+script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "DIR=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.setpgid, Credential: o.cred}
	if o.cred != nil {
		require.NoError(t, os.Chown(dir, int(o.cred.Uid), int(o.cred.Gid)))
	}
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{t: t, cmd: cmd, dir: dir, stdin: stdin, group: o.setpgid}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			if p.group {
				// The leader is not reaped yet, so its PID still
				// names this group.
				unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
			}
			cmd.Process.Kill()
		}
		stdin.Close()
		cmd.Wait()
	})
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// ready waits for the readiness file name and returns its contents.
func (p *proc) ready(name string) string {
	p.t.Helper()
	return string(testroot.WaitFile(p.t, filepath.Join(p.dir, name), p.pid()))
}

// release closes the script's stdin (its `read` returns) and waits for it.
func (p *proc) release() error {
	p.stdin.Close()
	return p.cmd.Wait()
}

// startTimeOf reads field 22 of /proc/PID/stat independently of parseStat.
func startTimeOf(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	v, err := strconv.ParseUint(f[19], 10, 64)
	require.NoError(t, err)
	return v
}

// stateOf reads field 3 of /proc/PID/stat.
func stateOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testroot.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// openPID opens a verified handle on pid. At cleanup the handle SIGKILLs the
// process if it still runs, and a process that re-parented to the test
// (a group member whose leader is gone) is reaped.
func openPID(t *testing.T, pid int) *Process {
	t.Helper()
	id, err := Of(pid)
	require.NoError(t, err)
	p, err := Open(id)
	require.NoError(t, err)
	t.Cleanup(func() {
		if !p.Exited() {
			p.Signal(syscall.SIGKILL)
			ctx, cancel := context.WithTimeout(context.Background(), testroot.Timeout)
			p.Wait(ctx)
			cancel()
		}
		p.Close()
		reap(pid)
	})
	return p
}

// reap collects pid if it is an exited child of the test process (members
// re-parent here: TestMain makes the test a subreaper). ECHILD: not ours.
func reap(pid int) {
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		if err != unix.EINTR {
			return
		}
	}
}

func TestSelf(t *testing.T) {
	id, err := Self()
	require.NoError(t, err)
	host, err := os.Hostname()
	require.NoError(t, err)
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)

	assert.Equal(t, os.Getpid(), id.PID)
	assert.Equal(t, os.Geteuid(), id.UID)
	assert.Equal(t, host, id.Host)
	assert.Equal(t, strings.TrimSpace(string(boot)), id.BootID)
	assert.Equal(t, startTimeOf(t, os.Getpid()), id.StartTime)
	assert.Equal(t, Alive, Check(id).State)
}

func TestOfAliveThenDeadAfterExit(t *testing.T) {
	p := spawn(t, `ready up; read x || true`, spawnOpts{})
	p.ready("up")
	id, err := Of(p.pid())
	require.NoError(t, err)
	self, err := Self()
	require.NoError(t, err)
	assert.Equal(t, p.pid(), id.PID)
	assert.Equal(t, startTimeOf(t, p.pid()), id.StartTime)
	assert.Equal(t, 0, id.UID)
	assert.Equal(t, self.BootID, id.BootID)
	assert.Equal(t, self.Host, id.Host)
	assert.Equal(t, Alive, Check(id).State, Check(id).Reason)

	require.NoError(t, p.release())

	v := Check(id)
	assert.Equal(t, Dead, v.State, v.Reason)
	_, err = Of(id.PID)
	assert.ErrorIs(t, err, ErrGone)
	_, err = Open(id)
	assert.ErrorIs(t, err, ErrGone)
}

func TestZombieIsDead(t *testing.T) {
	p := spawn(t, `ready up; exec sleep 1000`, spawnOpts{})
	p.ready("up")
	h := openPID(t, p.pid())
	id := h.Identity()
	require.NoError(t, h.Signal(syscall.SIGKILL))
	require.NoError(t, h.Wait(waitCtx(t)))

	// Not reaped: the process is a zombie.
	require.Equal(t, "Z", stateOf(t, p.pid()))
	v := Check(id)
	assert.Equal(t, Dead, v.State)
	assert.Contains(t, v.Reason, "zombie")
	_, err := Of(id.PID)
	assert.ErrorIs(t, err, ErrGone)
	_, err = Open(id)
	assert.ErrorIs(t, err, ErrGone)
	assert.True(t, h.Exited())
}

// TestCheckAndOpenForged runs every forged variant of a live bystander's
// identity through Check and Open. None may be Alive but the real one, none
// may yield a handle, and the bystander must end as it would have without
// the test: exit status 0, never signalled.
func TestCheckAndOpenForged(t *testing.T) {
	by := spawn(t, `ready up; read x || true`, spawnOpts{})
	by.ready("up")
	real, err := Of(by.pid())
	require.NoError(t, err)

	tests := []struct {
		name    string
		forge   func(*Identity)
		state   State
		reason  string
		openErr error
	}{
		{name: "real", forge: func(*Identity) {}, state: Alive, reason: "running"},
		{name: "later start time", forge: func(id *Identity) { id.StartTime++ }, state: Dead, reason: "reused", openErr: ErrGone},
		{name: "earlier start time", forge: func(id *Identity) { id.StartTime-- }, state: Dead, reason: "reused", openErr: ErrGone},
		// A missing field proves nothing: never "dead" (issue 12).
		{name: "zero start time", forge: func(id *Identity) { id.StartTime = 0 }, state: Unknown, reason: "start_time is missing", openErr: ErrUnverifiable},
		{name: "other boot id", forge: func(id *Identity) { id.BootID = "00000000-0000-0000-0000-000000000000" }, state: Dead, reason: "earlier boot", openErr: ErrGone},
		{name: "empty boot id", forge: func(id *Identity) { id.BootID = "" }, state: Unknown, reason: "boot_id is missing", openErr: ErrUnverifiable},
		{name: "empty host", forge: func(id *Identity) { id.Host = "" }, state: Unknown, reason: "host is missing", openErr: ErrUnverifiable},
		{name: "boot id with a control character", forge: func(id *Identity) { id.BootID += "\n" }, state: Unknown, reason: "control character", openErr: ErrUnverifiable},
		{name: "other uid", forge: func(id *Identity) { id.UID = 4321 }, state: Unknown, reason: "runs as uid 0, recorded 4321", openErr: ErrUnverifiable},
		{name: "other host", forge: func(id *Identity) { id.Host += ".elsewhere" }, state: Unknown, reason: "recorded on host", openErr: ErrUnverifiable},
		{name: "other host and boot", forge: func(id *Identity) { id.Host, id.BootID = "elsewhere", "x" }, state: Unknown, reason: "recorded on host", openErr: ErrUnverifiable},
		{name: "pid 0", forge: func(id *Identity) { id.PID = 0 }, state: Unknown, reason: "pid 0 is not positive", openErr: ErrUnverifiable},
		{name: "negative pid", forge: func(id *Identity) { id.PID = -id.PID }, state: Unknown, reason: "is not positive", openErr: ErrUnverifiable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := real
			tt.forge(&id)
			v := Check(id)
			assert.Equal(t, tt.state, v.State, v.Reason)
			assert.Contains(t, v.Reason, tt.reason)

			h, err := Open(id)
			if tt.openErr == nil {
				require.NoError(t, err)
				assert.Equal(t, real, h.Identity())
				assert.False(t, h.Exited())
				require.NoError(t, h.Close())
				return
			}
			require.ErrorIs(t, err, tt.openErr)
			assert.Nil(t, h)
		})
	}

	require.Equal(t, Alive, Check(real).State, "the bystander must still run")
	require.NoError(t, by.release(), "the bystander must exit normally, never signalled")
}

// TestPIDReuseBystander forges a record of a process that exited onto the
// PID of a live bystander (the start time of the dead process, the PID of
// the live one): the verdict is Dead, Open returns ErrGone, and the
// bystander is never signalled.
func TestPIDReuseBystander(t *testing.T) {
	dead := spawn(t, `ready up; read x || true`, spawnOpts{})
	dead.ready("up")
	deadID, err := Of(dead.pid())
	require.NoError(t, err)
	require.NoError(t, dead.release())

	// Start times count clock ticks: a bystander started in the same tick
	// as the dead process would be indistinguishable from it, so start
	// bystanders until the tick has passed.
	var by *proc
	for i := 0; ; i++ {
		require.Less(t, i, 10000, "the clock tick never passed")
		by = spawn(t, `ready up; read x || true`, spawnOpts{})
		by.ready("up")
		if startTimeOf(t, by.pid()) != deadID.StartTime {
			break
		}
		require.NoError(t, by.release())
	}
	forged := deadID
	forged.PID = by.pid()

	assert.Equal(t, Dead, Check(forged).State)
	h, err := Open(forged)
	require.ErrorIs(t, err, ErrGone)
	require.Nil(t, h)

	require.NoError(t, by.release(), "the bystander must exit normally, never signalled")
}

func TestOtherUser(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	p := spawn(t, `ready up; read x || true`, spawnOpts{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}})
	p.ready("up")
	id, err := Of(p.pid())
	require.NoError(t, err)
	require.Equal(t, uid, id.UID)
	assert.Equal(t, Alive, Check(id).State)

	// A record claiming the process runs as root is not believed.
	forged := id
	forged.UID = 0
	v := Check(forged)
	assert.Equal(t, Unknown, v.State)
	assert.Contains(t, v.Reason, "runs as uid "+strconv.Itoa(uid))
	_, err = Open(forged)
	assert.ErrorIs(t, err, ErrUnverifiable)

	require.NoError(t, p.release())
}

func TestOpenRefusesSelfAndAncestors(t *testing.T) {
	chain := []int{os.Getpid()}
	for pid := os.Getpid(); ; {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		require.NoError(t, err)
		s := string(b)
		ppid, err := strconv.Atoi(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[1])
		require.NoError(t, err)
		if ppid == 0 {
			break
		}
		chain = append(chain, ppid)
		pid = ppid
	}
	require.GreaterOrEqual(t, len(chain), 2, "the test has a parent")
	for i, pid := range chain {
		name := "ancestor " + strconv.Itoa(i)
		switch i {
		case 0:
			name = "self"
		case 1:
			name = "parent"
		}
		t.Run(name, func(t *testing.T) {
			id, err := Of(pid)
			require.NoError(t, err)
			assert.Equal(t, Alive, Check(id).State)
			h, err := Open(id)
			require.ErrorIs(t, err, ErrRefused)
			require.Nil(t, h)
		})
	}
}

// TestSignal sends each signal through a handle and checks that exactly that
// signal ended the process.
func TestSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL, syscall.SIGUSR1, syscall.SIGHUP, syscall.SIGINT} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			p := spawn(t, `ready up; exec sleep 1000`, spawnOpts{})
			p.ready("up")
			h := openPID(t, p.pid())
			assert.False(t, h.Exited())
			require.NoError(t, h.Signal(sig))
			require.NoError(t, h.Wait(waitCtx(t)))
			assert.True(t, h.Exited())

			err := p.cmd.Wait()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee)
			ws := ee.Sys().(syscall.WaitStatus)
			require.True(t, ws.Signaled(), "status %v", ws)
			assert.Equal(t, sig, ws.Signal())

			// Reaped: the handle reaches nobody.
			assert.ErrorIs(t, h.Signal(syscall.SIGKILL), ErrGone)
			assert.ErrorIs(t, h.SignalGroup(syscall.SIGKILL), ErrGone)
		})
	}
}

// groupScript leads a process group with two sleeping members and reports
// their PIDs; it exits when its stdin closes, leaving the members running.
const groupScript = `sleep 1000 & a=$!; sleep 1000 & b=$!; ready pids "$a $b"; read x || true`

func spawnGroup(t *testing.T) (leader *proc, members []int) {
	t.Helper()
	leader = spawn(t, groupScript, spawnOpts{setpgid: true})
	for _, f := range strings.Fields(leader.ready("pids")) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		members = append(members, pid)
	}
	require.Len(t, members, 2)
	for _, m := range members {
		pg, err := GroupOf(m)
		require.NoError(t, err)
		require.Equal(t, leader.pid(), pg, "member %d in group %d", m, pg)
	}
	return leader, members
}

func TestSignalGroup(t *testing.T) {
	leader, members := spawnGroup(t)
	lh := openPID(t, leader.pid())
	var mh []*Process
	for _, m := range members {
		mh = append(mh, openPID(t, m))
	}

	require.NoError(t, lh.SignalGroup(syscall.SIGKILL))

	ctx := waitCtx(t)
	require.NoError(t, lh.Wait(ctx))
	for _, h := range mh {
		require.NoError(t, h.Wait(ctx), "member %d", h.Identity().PID)
	}
	err := leader.cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
	for _, m := range members {
		reap(m)
	}
	alive, err := GroupAlive(leader.pid())
	require.NoError(t, err)
	assert.False(t, alive)
}

// TestSignalGroupAfterLeaderReaped: a pidfd opened while the leader lived
// still reaches its group after the leader exited and was reaped.
func TestSignalGroupAfterLeaderReaped(t *testing.T) {
	leader, members := spawnGroup(t)
	lh := openPID(t, leader.pid())
	var mh []*Process
	for _, m := range members {
		mh = append(mh, openPID(t, m))
	}
	leaderID := lh.Identity()

	require.NoError(t, leader.release(), "the leader exits normally")
	assert.Equal(t, Dead, Check(leaderID).State)
	_, err := Open(leaderID)
	require.ErrorIs(t, err, ErrGone)
	assert.ErrorIs(t, lh.Signal(syscall.SIGKILL), ErrGone, "the leader itself is gone")
	for _, h := range mh {
		require.False(t, h.Exited(), "member %d survived its leader", h.Identity().PID)
	}
	alive, err := GroupAlive(leaderID.PID)
	require.NoError(t, err)
	require.True(t, alive)

	require.NoError(t, lh.SignalGroup(syscall.SIGKILL))
	ctx := waitCtx(t)
	for _, h := range mh {
		require.NoError(t, h.Wait(ctx), "member %d", h.Identity().PID)
	}
	for _, m := range members {
		reap(m)
	}
	alive, err = GroupAlive(leaderID.PID)
	require.NoError(t, err)
	assert.False(t, alive)
}

// TestSignalGroupThroughMemberIsGone: a pidfd on a member does not reach the
// member's group (the kernel answers ESRCH), and nobody is signalled.
func TestSignalGroupThroughMemberIsGone(t *testing.T) {
	leader, members := spawnGroup(t)
	lh := openPID(t, leader.pid())
	mh := openPID(t, members[0])
	other := openPID(t, members[1])

	require.ErrorIs(t, mh.SignalGroup(syscall.SIGKILL), ErrGone)

	for _, h := range []*Process{lh, mh, other} {
		assert.False(t, h.Exited(), "pid %d was signalled", h.Identity().PID)
		assert.Equal(t, Alive, Check(h.Identity()).State)
	}
}

// TestSignalGroupRefusesOwnGroup: a process that joined a group it did not
// start (so the leader is not its ancestor and Open succeeds) must not
// signal that group: it would signal itself.
func TestSignalGroupRefusesOwnGroup(t *testing.T) {
	leader := spawn(t, `ready up; read x || true`, spawnOpts{setpgid: true})
	leader.ready("up")
	exe, err := os.Executable()
	require.NoError(t, err)
	readyDir := testroot.Dir(t)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), "OJ_TEST_CHILD=signal-own-group", "OJ_TEST_READY_DIR="+readyDir, "OJ_LEADER="+strconv.Itoa(leader.pid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: leader.pid()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	b := testroot.WaitFile(t, filepath.Join(readyDir, "result"), cmd.Process.Pid)
	require.NoError(t, cmd.Wait(), "child exits normally, not by its own SIGTERM: %s", stderr.String())
	res := decodeResult(t, b)
	assert.True(t, res.Refused, "result %+v", res)

	require.NoError(t, leader.release(), "the leader was not signalled")
}

func TestWaitReturnsOnExit(t *testing.T) {
	p := spawn(t, `ready up; read x || true`, spawnOpts{})
	p.ready("up")
	h := openPID(t, p.pid())
	done := make(chan error, 1)
	go func() { done <- h.Wait(context.Background()) }()
	assert.False(t, h.Exited())
	p.stdin.Close()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(testroot.Timeout):
		t.Fatal("Wait did not return after the process exited")
	}
	assert.True(t, h.Exited())
	require.NoError(t, p.cmd.Wait())
	assert.True(t, h.Exited(), "after reaping")
	require.NoError(t, h.Wait(context.Background()), "Wait on an exited process returns at once")
}

func TestWaitContext(t *testing.T) {
	p := spawn(t, `ready up; read x || true`, spawnOpts{})
	p.ready("up")
	h := openPID(t, p.pid())

	t.Run("already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, h.Wait(ctx), context.Canceled)
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.Wait(ctx) }()
		cancel()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(testroot.Timeout):
			t.Fatal("Wait ignored the cancellation")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, h.Wait(ctx), context.DeadlineExceeded)
	})
	assert.False(t, h.Exited(), "the process still runs")
	require.NoError(t, p.release())
}

// TestWaitConcurrent: waiters with different contexts do not disturb each
// other; cancelling one leaves the others waiting until the exit.
func TestWaitConcurrent(t *testing.T) {
	p := spawn(t, `ready up; read x || true`, spawnOpts{})
	p.ready("up")
	h := openPID(t, p.pid())

	const n = 4
	cancels := make([]context.CancelFunc, n)
	results := make([]chan error, n)
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i], results[i] = cancel, make(chan error, 1)
		go func() { results[i] <- h.Wait(ctx) }()
	}
	// Cancel the even waiters; they return, the odd ones keep waiting.
	for i := 0; i < n; i += 2 {
		cancels[i]()
		select {
		case err := <-results[i]:
			require.ErrorIs(t, err, context.Canceled)
		case <-time.After(testroot.Timeout):
			t.Fatalf("waiter %d ignored its cancellation", i)
		}
	}
	for i := 1; i < n; i += 2 {
		select {
		case err := <-results[i]:
			t.Fatalf("waiter %d returned %v while the process runs", i, err)
		default:
		}
	}
	p.stdin.Close()
	for i := 1; i < n; i += 2 {
		select {
		case err := <-results[i]:
			require.NoError(t, err)
		case <-time.After(testroot.Timeout):
			t.Fatalf("waiter %d did not see the exit", i)
		}
		cancels[i]()
	}
	require.NoError(t, p.cmd.Wait())
}

func TestHandleAfterClose(t *testing.T) {
	p := spawn(t, `ready up; read x || true`, spawnOpts{})
	p.ready("up")
	id, err := Of(p.pid())
	require.NoError(t, err)
	h, err := Open(id)
	require.NoError(t, err)
	require.NoError(t, h.Close())
	assert.Error(t, h.Signal(syscall.SIGKILL))
	assert.Error(t, h.Wait(context.Background()))
	require.NoError(t, p.release(), "a closed handle signals nobody")
}

func TestGroupAndParentOf(t *testing.T) {
	leader, members := spawnGroup(t)
	pg, err := GroupOf(leader.pid())
	require.NoError(t, err)
	assert.Equal(t, leader.pid(), pg)
	pp, err := ParentOf(leader.pid())
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), pp)
	for _, m := range members {
		pp, err := ParentOf(m)
		require.NoError(t, err)
		assert.Equal(t, leader.pid(), pp)
	}
	alive, err := GroupAlive(leader.pid())
	require.NoError(t, err)
	assert.True(t, alive)

	_, err = GroupOf(0)
	assert.True(t, errors.Is(err, ErrGone) || errors.Is(err, ErrUnverifiable), "%v", err)
}
