package cgroup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The test binary re-executes itself as a helper process when this variable
// is set; the value names what the helper does.
const helperEnv = "OJ_CGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
	case "kill-group":
		os.Exit(helperKillGroup(os.Getenv("OJ_CGROUP_TEST_PATH")))
	case "kill-from-below":
		os.Exit(helperKillFromBelow(os.Getenv("OJ_CGROUP_TEST_PATH"), os.Getenv("OJ_CGROUP_TEST_OUTSIDE")))
	default:
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", os.Getenv(helperEnv))
		os.Exit(2)
	}
	// Daemons double-forked by the tests re-parent to this process instead
	// of init, as they do to `ownerjournal run`: the tests reap them, which
	// proves how they died, and PID 1 of a minimal VM may not reap at all.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "PR_SET_CHILD_SUBREAPER: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// helperKillGroup runs in a process that is itself a member of the group:
// Kill must refuse. Exit 0 means refused as expected.
func helperKillGroup(path string) int {
	g, err := OpenGroup(path)
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer g.Close()
	err = g.Kill(context.Background())
	fmt.Println(err)
	if !errors.Is(err, ErrContainsCaller) {
		return 3
	}
	return 0
}

// hierarchy detects the real hierarchy. This machine kind has a writable
// cgroup v2 hierarchy: its absence is a failure, not a skip.
func hierarchy(t *testing.T) Hierarchy {
	t.Helper()
	h, err := Detect()
	require.NoError(t, err, "a writable cgroup v2 hierarchy is a prerequisite of these tests")
	return h
}

// newGroup creates a group and removes it at the end of the test, killing
// whatever is left in it.
func newGroup(t *testing.T) (Hierarchy, *Group) {
	t.Helper()
	h := hierarchy(t)
	g, err := h.Create("")
	require.NoError(t, err)
	t.Cleanup(func() {
		destroy(t, g.Path())
		assert.NoError(t, g.Close())
	})
	return h, g
}

// destroy kills and removes the group at path through a handle of its own,
// whatever state the test left it in. It reports whether the group is gone.
func destroy(t *testing.T, path string) bool {
	t.Helper()
	g, err := OpenGroup(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if !assert.NoError(t, err, "cleanup") {
		return false
	}
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !assert.NoError(t, g.Kill(ctx), "cleanup") {
		return false
	}
	return assert.NoError(t, g.Remove(), "cleanup")
}

// subgroup makes a child group dir/name the way a member would, with
// mkdir(2), and opens it.
func subgroup(t *testing.T, dir, name string) *Group {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.Mkdir(p, 0o755))
	g, err := OpenGroup(p)
	require.NoError(t, err)
	t.Cleanup(func() { g.Close() })
	return g
}

func requireTools(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		_, err := exec.LookPath(n)
		require.NoError(t, err, "%s is a prerequisite of these tests", n)
	}
}

// daemonScript records the cgroup the shell was born in, then starts $2
// daemons the way tmux does: each in a new session (setsid) and orphaned by
// its parent (the inner shell exits), so it re-parents to the nearest
// subreaper. Their PIDs go to $1/pids.
const daemonScript = `d=$1 n=$2
grep '^0::' /proc/self/cgroup > "$d/born"
i=0
while [ "$i" -lt "$n" ]; do
	setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 & echo $! >> "$1/pids"' sh "$d"
	i=$((i+1))
done
`

// startDaemons starts n daemons in the group whose directory descriptor is
// cgroupFD, through clone3(CLONE_INTO_CGROUP), and returns their PIDs. top
// is the group the test owns; at the end of the test it is killed and the
// daemons are reaped.
func startDaemons(t *testing.T, top string, cgroupDir string, cgroupFD int, n int) []int {
	t.Helper()
	requireTools(t, "sh", "setsid", "sleep", "grep")
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", daemonScript, "sh", dir, strconv.Itoa(n))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgroupFD}
	out, err := cmd.CombinedOutput()
	data, rerr := os.ReadFile(filepath.Join(dir, "pids"))
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	t.Cleanup(func() {
		if destroy(t, top) {
			reap(t, pids, false)
		}
	})
	require.NoError(t, err, "daemon script: %s", out)
	require.NoError(t, rerr)
	require.Len(t, pids, n)

	born, err := os.ReadFile(filepath.Join(dir, "born"))
	require.NoError(t, err)
	h := hierarchy(t)
	assert.Equal(t, "0::/"+strings.TrimPrefix(strings.TrimPrefix(cgroupDir, h.Mount), "/"), strings.TrimSpace(string(born)),
		"the shell must be born in the group")
	ourSID, err := unix.Getsid(0)
	require.NoError(t, err)
	for _, pid := range pids {
		ppid, sid := statPPIDSession(t, pid)
		require.Equal(t, os.Getpid(), ppid, "daemon %d must be orphaned and re-parented to the test (subreaper)", pid)
		require.NotEqual(t, ourSID, sid, "daemon %d must be in a session of its own (setsid)", pid)
	}
	return pids
}

// statPPIDSession reads the parent PID and session ID from /proc/PID/stat,
// parsing after the last ')' (the command may contain anything).
func statPPIDSession(t *testing.T, pid int) (ppid, sid int) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	i := strings.LastIndexByte(string(data), ')')
	require.Positive(t, i)
	f := strings.Fields(string(data[i+1:]))
	require.GreaterOrEqual(t, len(f), 4)
	ppid, err = strconv.Atoi(f[1])
	require.NoError(t, err)
	sid, err = strconv.Atoi(f[3])
	require.NoError(t, err)
	return ppid, sid
}

// reap waits for each daemon, which is our child (we are its subreaper),
// so its PID cannot be reused before this wait. With wantKilled it asserts
// the daemon died of SIGKILL. A PID already reaped is skipped.
func reap(t *testing.T, pids []int, wantKilled bool) {
	t.Helper()
	for _, pid := range pids {
		var ws unix.WaitStatus
		var got int
		err := ignoringEINTR(func() (err error) { got, err = unix.Wait4(pid, &ws, 0, nil); return err })
		if err == unix.ECHILD && !wantKilled {
			continue
		}
		require.NoError(t, err, "wait4 %d", pid)
		require.Equal(t, pid, got)
		if wantKilled {
			require.True(t, ws.Signaled(), "daemon %d: %v", pid, ws)
			require.Equal(t, unix.SIGKILL, ws.Signal(), "daemon %d", pid)
		}
	}
}

func killCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDetect(t *testing.T) {
	h := hierarchy(t)
	assert.True(t, h.Parent == h.Mount || under(h.Parent, h.Mount), "parent %s under mount %s", h.Parent, h.Mount)
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(h.Parent, &st))
	assert.Equal(t, int64(unix.CGROUP2_SUPER_MAGIC), int64(st.Type))
	require.NoError(t, unix.Faccessat(unix.AT_FDCWD, h.Parent, unix.W_OK, unix.AT_EACCESS))
	t.Logf("mount %s, parent %s", h.Mount, h.Parent)
}

// setSeams points Detect and OpenGroup at fixture files.
func setSeams(t *testing.T, mountinfo, selfCgroup string) {
	t.Helper()
	dir := t.TempDir()
	mi, sc := filepath.Join(dir, "mountinfo"), filepath.Join(dir, "cgroup")
	require.NoError(t, os.WriteFile(mi, []byte(mountinfo), 0o600))
	require.NoError(t, os.WriteFile(sc, []byte(selfCgroup), 0o600))
	oldMI, oldSC := mountinfoPath, procSelfCgroup
	mountinfoPath, procSelfCgroup = mi, sc
	t.Cleanup(func() { mountinfoPath, procSelfCgroup = oldMI, oldSC })
}

func cgroup2Line(point string) string {
	return "41 31 0:38 / " + point + " rw,relatime - cgroup2 cgroup2 rw\n"
}

func TestDetectFixtures(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "these tests run as root on this machine kind")
	hier := hierarchy(t)
	_, own := newGroup(t)
	ownRel := strings.TrimPrefix(own.Path(), hier.Mount)
	v1 := "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
	notCgroup2 := t.TempDir()

	tests := []struct {
		name       string
		mountinfo  string
		self       string
		wantErr    []error // each must match with errors.Is
		wantParent string
	}{
		{name: "no cgroup2 mount", mountinfo: v1, self: "0::/\n",
			wantErr: []error{ErrUnavailable}},
		{name: "no 0:: line", mountinfo: cgroup2Line(hier.Mount), self: "4:cpu:/\n",
			wantErr: []error{ErrUnavailable}},
		{name: "mount point missing", mountinfo: cgroup2Line("/nonexistent/oj-test"), self: "0::/\n",
			wantErr: []error{ErrUnavailable, fs.ErrNotExist}},
		{name: "mount point not cgroup2", mountinfo: cgroup2Line(notCgroup2), self: "0::/\n",
			wantErr: []error{ErrUnavailable}},
		{name: "own cgroup writable", mountinfo: v1 + cgroup2Line(hier.Mount), self: "1:cpu:/\n0::" + ownRel + "\n",
			wantParent: own.Path()},
		{name: "own cgroup missing falls back to mount root", mountinfo: cgroup2Line(hier.Mount), self: "0::/oj-no-such-group\n",
			wantParent: hier.Mount},
		{name: "own cgroup outside namespace falls back to mount root", mountinfo: cgroup2Line(hier.Mount), self: "0::/../x\n",
			wantParent: hier.Mount},
		{name: "unusable mount skipped", mountinfo: cgroup2Line("/nonexistent/oj-test") + cgroup2Line(hier.Mount), self: "0::/\n",
			wantParent: hier.Mount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setSeams(t, tt.mountinfo, tt.self)
			h, err := Detect()
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.True(t, strings.HasPrefix(err.Error(), "cgroup: "), "message %q", err)
				for _, want := range tt.wantErr {
					assert.ErrorIs(t, err, want)
				}
				t.Log(err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantParent, h.Parent)
		})
	}

	t.Run("mountinfo missing", func(t *testing.T) {
		setSeams(t, "", "0::/\n")
		mountinfoPath = filepath.Join(t.TempDir(), "absent")
		_, err := Detect()
		assert.ErrorIs(t, err, ErrUnavailable)
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
}

// TestDetectReadOnlyMount makes the real hierarchy unwritable the only way
// root cannot bypass: a read-only bind mount of it.
func TestDetectReadOnlyMount(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "these tests run as root on this machine kind")
	hier := hierarchy(t)
	ro := filepath.Join(t.TempDir(), "ro")
	require.NoError(t, os.Mkdir(ro, 0o755))
	require.NoError(t, unix.Mount(hier.Mount, ro, "", unix.MS_BIND, ""))
	t.Cleanup(func() { assert.NoError(t, unix.Unmount(ro, unix.MNT_DETACH)) })
	require.NoError(t, unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""))

	setSeams(t, cgroup2Line(ro), "0::/\n")
	_, err := Detect()
	require.ErrorIs(t, err, ErrUnavailable)
	assert.ErrorIs(t, err, unix.EROFS)
	t.Log(err)
}

func TestCreate(t *testing.T) {
	h, g := newGroup(t)
	assert.Equal(t, h.Parent, filepath.Dir(g.Path()))
	assert.True(t, strings.HasPrefix(filepath.Base(g.Path()), fmt.Sprintf("oj-%d-", os.Getpid())))
	assert.GreaterOrEqual(t, g.FD(), 0)
	fi, err := os.Stat(g.Path())
	require.NoError(t, err)
	assert.True(t, fi.IsDir())

	populated, err := g.Populated()
	require.NoError(t, err)
	assert.False(t, populated)
	procs, err := g.Procs()
	require.NoError(t, err)
	assert.Empty(t, procs)

	name := filepath.Base(g.Path())
	_, err = h.Create(name)
	assert.ErrorIs(t, err, fs.ErrExist)

	for _, bad := range []string{"..", "a/b", "../escape", "cgroup.procs", ".x"} {
		_, err := h.Create(bad)
		assert.Error(t, err, "name %q", bad)
	}
	_, err = os.Stat(filepath.Join(filepath.Dir(h.Parent), "escape"))
	assert.ErrorIs(t, err, fs.ErrNotExist)

	_, err = Hierarchy{}.Create("x")
	assert.ErrorIs(t, err, ErrUnavailable)
	_, err = Hierarchy{Mount: "/", Parent: t.TempDir()}.Create("x")
	assert.ErrorIs(t, err, ErrUnavailable, "a parent that is not cgroup2 is refused before mkdir")

	require.NoError(t, g.Remove())
	_, err = os.Stat(g.Path())
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, g.Remove(), "removing a removed group is progress")
}

func TestKillDaemons(t *testing.T) {
	_, g := newGroup(t)
	pids := startDaemons(t, g.Path(), g.Path(), g.FD(), 20)

	procs, err := g.Procs()
	require.NoError(t, err)
	assert.Equal(t, slices.Sorted(slices.Values(pids)), procs, "every daemon is a member")
	populated, err := g.Populated()
	require.NoError(t, err)
	require.True(t, populated)

	start := time.Now()
	require.NoError(t, g.Kill(killCtx(t)))
	t.Logf("Kill of %d daemons took %v", len(pids), time.Since(start))

	populated, err = g.Populated()
	require.NoError(t, err)
	assert.False(t, populated)
	procs, err = g.Procs()
	require.NoError(t, err)
	assert.Empty(t, procs)
	reap(t, pids, true)

	require.NoError(t, g.Remove())
	_, err = os.Stat(g.Path())
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestKill200(t *testing.T) {
	_, g := newGroup(t)
	start := time.Now()
	pids := startDaemons(t, g.Path(), g.Path(), g.FD(), 200)
	t.Logf("starting %d daemons took %v", len(pids), time.Since(start))
	procs, err := g.Procs()
	require.NoError(t, err)
	require.Len(t, procs, 200)

	start = time.Now()
	require.NoError(t, g.Kill(killCtx(t)))
	t.Logf("Kill of %d daemons took %v", len(pids), time.Since(start))
	// Checked before reaping, which would wait for the exits itself.
	populated, err := g.Populated()
	require.NoError(t, err)
	require.False(t, populated, "Kill returns only once the group is empty")
	require.NoError(t, g.Remove(), "an empty group can be removed at once")
	reap(t, pids, true)
}

// TestKillFallbackFreeze hides cgroup.kill to run the freeze, pidfd-SIGKILL,
// thaw path that kernels before 5.14 take, on a nested group.
func TestKillFallbackFreeze(t *testing.T) {
	_, g := newGroup(t)
	sub := subgroup(t, g.Path(), "sub")
	pids := startDaemons(t, g.Path(), g.Path(), g.FD(), 10)
	pids = append(pids, startDaemons(t, g.Path(), sub.Path(), sub.FD(), 10)...)

	old := killFile
	killFile = "cgroup.kill.absent"
	t.Cleanup(func() { killFile = old })

	start := time.Now()
	require.NoError(t, g.Kill(killCtx(t)))
	t.Logf("freeze-and-kill of %d daemons took %v", len(pids), time.Since(start))
	reap(t, pids, true)

	freeze, err := os.ReadFile(filepath.Join(g.Path(), "cgroup.freeze"))
	require.NoError(t, err)
	assert.Equal(t, "0", strings.TrimSpace(string(freeze)), "the group is thawed afterwards")
	require.NoError(t, g.Remove())
	_, err = os.Stat(g.Path())
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestKillNestedAndRemove: members made child groups of their own; Kill ends
// the whole subtree and Remove removes it deepest-first.
func TestKillNestedAndRemove(t *testing.T) {
	_, g := newGroup(t)
	a := subgroup(t, g.Path(), "a")
	b := subgroup(t, a.Path(), "b")
	subgroup(t, g.Path(), "c")
	pids := startDaemons(t, g.Path(), b.Path(), b.FD(), 5)
	pids = append(pids, startDaemons(t, g.Path(), g.Path(), g.FD(), 5)...)

	procs, err := g.Procs()
	require.NoError(t, err)
	assert.Equal(t, slices.Sorted(slices.Values(pids)), procs, "Procs covers the subtree")

	require.NoError(t, g.Kill(killCtx(t)))
	reap(t, pids, true)
	require.NoError(t, g.Remove())
	for _, p := range []string{b.Path(), a.Path(), g.Path()} {
		_, err := os.Stat(p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
	}
}

// TestRemoveCollectsErrors: a populated child group cannot be removed, and
// neither can its ancestors; everything else still is, and every failure
// is reported.
func TestRemoveCollectsErrors(t *testing.T) {
	_, g := newGroup(t)
	busy := subgroup(t, g.Path(), "busy")
	subgroup(t, g.Path(), "empty")
	deep := filepath.Join(g.Path(), "empty", "deep")
	require.NoError(t, os.Mkdir(deep, 0o755))
	pids := startDaemons(t, g.Path(), busy.Path(), busy.FD(), 1)

	err := g.Remove()
	require.Error(t, err)
	t.Log(err)
	assert.ErrorIs(t, err, unix.EBUSY)
	assert.Contains(t, err.Error(), busy.Path()+":")
	assert.Contains(t, err.Error(), "rmdir "+g.Path()+":")
	_, serr := os.Stat(filepath.Join(g.Path(), "empty"))
	assert.ErrorIs(t, serr, fs.ErrNotExist, "the empty sibling was still removed")
	_, serr = os.Stat(busy.Path())
	assert.NoError(t, serr)

	require.NoError(t, g.Kill(killCtx(t)))
	reap(t, pids, true)
	require.NoError(t, g.Remove())
}

// TestKillRefusesGroupOfCaller runs Kill from a process that is a member of
// a child group: it must refuse rather than kill itself. Were it not to
// refuse, the helper would die of SIGKILL and the run would fail.
func TestKillRefusesGroupOfCaller(t *testing.T) {
	_, g := newGroup(t)
	sub := subgroup(t, g.Path(), "sub")
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=kill-group", "OJ_CGROUP_TEST_PATH="+g.Path())
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: sub.FD()}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "helper: %s", out)
	assert.Contains(t, string(out), ErrContainsCaller.Error())
	populated, err := g.Populated()
	require.NoError(t, err)
	assert.False(t, populated)
}

func TestOpenGroup(t *testing.T) {
	h, g := newGroup(t)
	tests := []struct {
		name string
		path string
		want error
	}{
		{"outside", "/tmp/x", ErrNotGroup},
		{"dot-dot escape", h.Mount + "/../../etc", ErrNotGroup},
		{"dot-dot inside", g.Path() + "/../" + filepath.Base(g.Path()), ErrNotGroup},
		{"relative", "oj-x", ErrNotGroup},
		{"empty", "", ErrNotGroup},
		{"hierarchy root", h.Mount, ErrNotGroup},
		{"hierarchy root with slash", h.Mount + "/", ErrNotGroup},
		{"cgroup v1 mount", "/sys/fs/cgroup/cpu", ErrNotGroup},
		{"control file", g.Path() + "/cgroup.procs", ErrNotGroup},
		{"missing", h.Mount + "/oj-no-such-group", fs.ErrNotExist},
		{"missing nested", g.Path() + "/no/such", fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := OpenGroup(tt.path)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, got)
			assert.True(t, strings.HasPrefix(err.Error(), "cgroup: "), "message %q", err)
		})
	}
	t.Run("existing", func(t *testing.T) {
		o, err := OpenGroup(g.Path() + "/")
		require.NoError(t, err)
		defer o.Close()
		assert.Equal(t, g.Path(), o.Path())
	})
}

// TestOpenGroupChecksFilesystem: a mountinfo that claims an ordinary
// directory is cgroup2 does not make it a group; fstatfs decides.
func TestOpenGroupChecksFilesystem(t *testing.T) {
	fake := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(fake, "sub"), 0o755))
	setSeams(t, cgroup2Line(fake), "0::/\n")
	_, err := OpenGroup(filepath.Join(fake, "sub"))
	assert.ErrorIs(t, err, ErrNotGroup)
}

// TestRemovedGroup: another recoverer removed the group first; for this
// handle that is progress, not failure.
func TestRemovedGroup(t *testing.T) {
	h, g := newGroup(t)
	other, err := OpenGroup(g.Path())
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, g.Remove())

	require.NoError(t, other.Kill(killCtx(t)))
	populated, err := other.Populated()
	require.NoError(t, err)
	assert.False(t, populated)
	procs, err := other.Procs()
	require.NoError(t, err)
	assert.Empty(t, procs)
	require.NoError(t, other.Remove())

	// A new group under the same name is a different group: a stale
	// handle's Remove leaves it alone.
	again, err := h.Create(filepath.Base(g.Path()))
	require.NoError(t, err)
	t.Cleanup(func() { destroy(t, again.Path()); again.Close() })
	require.NoError(t, other.Remove())
	_, err = os.Stat(again.Path())
	require.NoError(t, err, "the new group with the old name survives")
	require.NoError(t, again.Remove())
}

func TestKillHonoursContext(t *testing.T) {
	_, g := newGroup(t)
	pids := startDaemons(t, g.Path(), g.Path(), g.FD(), 1)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := g.Kill(ctx)
	require.ErrorIs(t, err, context.Canceled)
	populated, perr := g.Populated()
	require.NoError(t, perr)
	assert.True(t, populated, "a cancelled Kill kills nothing")

	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = g.waitEvents(ctx, func(kv map[string]string) bool { return kv["populated"] == "0" })
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 10*time.Second)

	require.NoError(t, g.Kill(killCtx(t)))
	reap(t, pids, true)
}

func TestClosedGroup(t *testing.T) {
	_, g := newGroup(t)
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "Close is idempotent")
	assert.Equal(t, -1, g.FD())
	assert.ErrorIs(t, g.Kill(context.Background()), os.ErrClosed)
	assert.ErrorIs(t, g.Remove(), os.ErrClosed)
	_, err := g.Procs()
	assert.ErrorIs(t, err, os.ErrClosed)
	_, err = g.Populated()
	assert.ErrorIs(t, err, os.ErrClosed)

	var zero Group
	assert.Equal(t, -1, zero.FD())
	assert.ErrorIs(t, zero.Kill(context.Background()), os.ErrClosed)
}
