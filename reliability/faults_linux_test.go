package reliability

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
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
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// The faults of issue 17: a full disk, a low descriptor limit and a
// read-only or inode-full root, injected for real (tmpfs mounts with size=
// and nr_inodes=, remounts read-only, setrlimit in a re-executed helper that
// then execs the CLI). Each case ends with a recovery whose claim is checked
// against what still lives: a false clean is an exit 0 or "root removed"
// while a process the run recorded or started (everything carrying its tag)
// is alive.

// faultCase is one injected fault. It returns the exit code and the output
// (a --json document, or text) of the recovery whose claim is judged.
type faultCase struct {
	name string
	fn   func(t *testing.T, e *env, f *fault) (code int, out string)
}

var faultCases = []faultCase{
	{"disk-full-after-start", faultDiskFullAfterStart},
	{"one-free-page", faultOneFreePage},
	{"fd-limit-24-tree-49", faultFDLimitTree},
	{"fd-soft-limit-restored-for-cmd", faultFDSoftLimit},
	{"intent-then-crash", faultIntentCrash},
	{"read-only-root-all-json", faultReadOnlyRoot},
	{"inode-full-root-all-json", faultInodeFullRoot},
	{"low-fd-recover-40-trappers", faultLowFDRecover},
}

func testFaults(t *testing.T, e *env) {
	for _, fc := range faultCases {
		t.Run(fc.name, func(t *testing.T) {
			f := newFault(t, e, fc.name)
			code, out := fc.fn(t, e, f)
			e.reapOrphans()
			alive := settled(leakedProcs(f.tag, f.dir))
			claimed := code == 0 || rootRemovedClaim(out)
			falseClean := claimed && len(alive) > 0
			if falseClean {
				t.Errorf("false clean: recovery exited %d (root removed claimed: %v) while %d recorded or descended process(es) live: %v\n%s",
					code, rootRemovedClaim(out), len(alive), alive, out)
			}
			e.killLeaked(alive)
			sum.addFault(falseClean)
		})
	}
}

// rootRemovedClaim reports whether a recovery's output claims the root was
// removed, in either output form.
func rootRemovedClaim(out string) bool {
	return strings.Contains(out, "root removed") || strings.Contains(out, `"root_removed": true`)
}

// fault is one fault case's state: a private directory DIR with the marker
// directory DIR/k, a tmpfs mounted on DIR/m and the root DIR/m/r.
type fault struct {
	dir, mnt, root, marks, tag string
}

func newFault(t *testing.T, e *env, name string) *fault {
	t.Helper()
	dir := testroot.PrivateDir(t, "ojf")
	f := &fault{dir: dir, mnt: filepath.Join(dir, "m"), marks: filepath.Join(dir, "k"), tag: fmt.Sprintf("fault-%s-%d", name, os.Getpid())}
	f.root = filepath.Join(f.mnt, "r")
	require.NoError(t, os.Mkdir(f.marks, 0o700))
	t.Cleanup(func() { e.killLeaked(leakedProcs(f.tag, f.dir)) })
	return f
}

// mount mounts a tmpfs with opts (size=, nr_inodes=) on f.mnt and creates
// the root inside it; the mount is undone at cleanup (lazily if busy).
func (f *fault) mount(t *testing.T, opts string) {
	t.Helper()
	require.NoError(t, os.Mkdir(f.mnt, 0o700))
	require.NoError(t, unix.Mount("tmpfs", f.mnt, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700,"+opts), "mount -t tmpfs -o %s %s", opts, f.mnt)
	t.Cleanup(func() {
		if err := unix.Unmount(f.mnt, 0); err != nil {
			unix.Unmount(f.mnt, unix.MNT_DETACH)
		}
	})
	require.NoError(t, os.Mkdir(f.root, 0o700))
	j, err := journal.Open(f.root)
	require.NoError(t, err)
	j.Close()
}

// remount makes the tmpfs read-only or writable again.
func (f *fault) remount(t *testing.T, ro bool) {
	t.Helper()
	flags := uintptr(unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if ro {
		flags |= unix.MS_RDONLY
	}
	require.NoError(t, unix.Mount("tmpfs", f.mnt, "tmpfs", flags, ""), "remount %s (read-only %v)", f.mnt, ro)
}

// fill takes every free page of the tmpfs but leave.
func (f *fault) fill(t *testing.T, leave int64) {
	t.Helper()
	var st unix.Statfs_t
	require.NoError(t, unix.Statfs(f.mnt, &st))
	n := (int64(st.Bavail) - leave) * st.Bsize
	require.Positive(t, n, "the tmpfs has %d free pages, %d to leave", st.Bavail, leave)
	fl, err := os.OpenFile(filepath.Join(f.mnt, "fill"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer fl.Close()
	require.NoError(t, unix.Fallocate(int(fl.Fd()), 0, 0, n+mustSize(t, fl)))
	require.NoError(t, unix.Statfs(f.mnt, &st))
	require.EqualValues(t, leave, st.Bavail, "free pages after filling")
}

func mustSize(t *testing.T, fl *os.File) int64 {
	fi, err := fl.Stat()
	require.NoError(t, err)
	return fi.Size()
}

// fillInodes creates empty files until the tmpfs has no inode left.
func (f *fault) fillInodes(t *testing.T) {
	t.Helper()
	d := filepath.Join(f.mnt, "inodes")
	require.NoError(t, os.Mkdir(d, 0o700))
	for i := 0; ; i++ {
		fl, err := os.OpenFile(filepath.Join(d, strconv.Itoa(i)), os.O_CREATE|os.O_WRONLY, 0o600)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		require.NoError(t, err)
		fl.Close()
		require.Less(t, i, 100000, "the tmpfs never ran out of inodes")
	}
}

// exists is a condition: the marker file name exists.
func (f *fault) exists(name string) func() bool {
	return func() bool { _, err := os.Stat(filepath.Join(f.marks, name)); return err == nil }
}

// records returns the root's records (nil when it cannot be read).
func (f *fault) records() []*journal.Record {
	j, err := journal.Open(f.root)
	if err != nil {
		return nil
	}
	defer j.Close()
	s, err := j.Scan()
	if err != nil {
		return nil
	}
	return s.Records
}

// journaled counts the records labelled label whose subject is known.
func (f *fault) journaled(label string) int {
	n := 0
	for _, r := range f.records() {
		if r.Label == label && r.Subject != nil {
			n++
		}
	}
	return n
}

// run starts `ownerjournal run --cgroup=off` on script (with $K the marker
// directory) through the rlimited helper when nofile is set.
func (f *fault) run(t *testing.T, e *env, nofile string, script string) *proc {
	t.Helper()
	argv := []string{e.cli, "run", "--cgroup=off", "--root", f.root, "--label", "fault", "--grace", "2s", "--", "sh", "-c", script}
	env := tagEnv(f.tag, "K="+f.marks)
	return e.spawn(t, rlimited(t, nofile, argv, env))
}

// recoverJSON runs `ownerjournal recover ARGS --json` and returns its exit
// code and stdout, which must be exactly one JSON document.
func (f *fault) recoverJSON(t *testing.T, e *env, nofile string, args ...string) (int, string) {
	t.Helper()
	argv := append([]string{e.cli, "recover", "--root", f.root, "--json"}, args...)
	cmd := rlimited(t, nofile, argv, tagEnv(f.tag))
	var stdout, stderr testroot.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	p := e.spawn(t, cmd)
	require.NoError(t, p.wait(timeout), "recover: %s", stderr.String())
	doc := requireOneJSON(t, stdout.Bytes(), stderr.String())
	elapsed, _ := doc["elapsed_ns"].(float64)
	t.Logf("recover %v: exit %d after %v\n%s", args, p.exitCode(), time.Duration(elapsed).Round(time.Millisecond), stderr.String())
	return p.exitCode(), stdout.String()
}

// requireOneJSON checks that b is exactly one JSON document and returns it.
func requireOneJSON(t *testing.T, b []byte, ctx string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	var v, rest map[string]any
	require.NoError(t, dec.Decode(&v), "not a JSON document: %q\n%s", b, ctx)
	require.ErrorIs(t, dec.Decode(&rest), io.EOF, "more than one JSON document: %q", b)
	return v
}

// rlimited is argv started through the helper "rlimited", which sets
// RLIMIT_NOFILE to nofile ("soft" or "soft:hard") and execs argv; with
// nofile empty, argv is started directly.
func rlimited(t *testing.T, nofile string, argv, env []string) *exec.Cmd {
	t.Helper()
	var cmd *exec.Cmd
	if nofile == "" {
		cmd = exec.Command(argv[0], argv[1:]...)
	} else {
		exe, err := os.Executable()
		require.NoError(t, err)
		b, err := json.Marshal(argv)
		require.NoError(t, err)
		cmd = exec.Command(exe, "-test.run=^$")
		env = append(env, "OJ_TEST_CHILD=rlimited", "OJ_REL_NOFILE="+nofile, "OJ_REL_ARGV="+string(b))
	}
	cmd.Env = append(withoutTMUX(os.Environ()), env...)
	cmd.Dir = "/"
	return cmd
}

// childRlimited sets RLIMIT_NOFILE as OJ_REL_NOFILE says and execs the
// command in OJ_REL_ARGV (a JSON array).
func childRlimited() int {
	soft, hard, _ := strings.Cut(os.Getenv("OJ_REL_NOFILE"), ":")
	if hard == "" {
		hard = soft
	}
	cur, err1 := strconv.ParseUint(soft, 10, 64)
	max, err2 := strconv.ParseUint(hard, 10, 64)
	var argv []string
	if err := errors.Join(err1, err2, json.Unmarshal([]byte(os.Getenv("OJ_REL_ARGV")), &argv)); err != nil || len(argv) == 0 {
		return childFail("rlimited", fmt.Errorf("bad OJ_REL_NOFILE or OJ_REL_ARGV: %v", err))
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: cur, Max: max}); err != nil {
		return childFail("rlimited", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OJ_TEST_CHILD=") && !strings.HasPrefix(kv, "OJ_REL_NOFILE=") && !strings.HasPrefix(kv, "OJ_REL_ARGV=") {
			env = append(env, kv)
		}
	}
	return childFail("rlimited", syscall.Exec(argv[0], argv, env))
}

// daemons is a shell fragment that starts $1 double-forked, setsid sleepers
// (re-parented to the supervisor, in sessions of their own), each writing
// its PID to $K/d.N.
const daemons = `spawn() { i=0; while [ $i -lt $1 ]; do i=$((i+1)); ( setsid sh -c 'echo $$ > "$K/d.$0"; exec sleep 100000' $i & ); done; }`

// waitDaemons waits until n daemon PID files exist.
func (f *fault) waitDaemons(t *testing.T, n int) {
	t.Helper()
	waitUntil(t, []string{f.marks}, nil, func() bool {
		m, _ := filepath.Glob(filepath.Join(f.marks, "d.*"))
		return len(m) >= n
	}, fmt.Sprintf("%d daemons", n))
}

// settleWait bounds how long settleRun waits for run to journal its tree.
const settleWait = 30 * time.Second

// settleRun waits until run has journaled want descendants (and CMD) or
// has exited (failing closed), then SIGKILLs it if it still runs: the crash
// after which recovery must not claim a clean end.
func (f *fault) settleRun(t *testing.T, sup *proc, want int) {
	t.Helper()
	settled := func() bool {
		return sup.exited() || f.journaled("fault descendant") >= want && f.journaled("fault") == 1
	}
	// Bounded but not fatal: a run that neither journals its tree nor
	// fails closed (the silent failure) is crashed all the same, and the
	// recovery after it is judged.
	for deadline := time.Now().Add(settleWait); !settled(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("run neither journaled its tree (%d of %d descendants) nor failed closed within %v", f.journaled("fault descendant"), want, settleWait)
			break
		}
	}
	if sup.exited() {
		require.NoError(t, sup.wait(timeout))
		t.Logf("run exited %d:\n%s", sup.exitCode(), sup.stderrText())
		assert.NotEqual(t, 0, sup.exitCode(), "run exited 0 without journaling the tree")
		return
	}
	sup.kill()
	t.Logf("run SIGKILLed:\n%s", sup.stderrText())
}

// faultDiskFullAfterStart: the root's file system fills up between run's
// start and its descendants' birth. Before: the daemons were never
// journaled, silently, and recovery removed the root while they lived.
func faultDiskFullAfterStart(t *testing.T, e *env, f *fault) (int, string) {
	f.mount(t, "size=512k")
	sup := f.run(t, e, "", daemons+`
: > "$K/started"
while [ ! -e "$K/go" ]; do sleep 0.05; done
spawn 3
exec sleep 100000`)
	waitUntil(t, []string{f.marks, filepath.Join(f.root, "records")}, sup, func() bool {
		return f.exists("started")() && f.journaled("fault") == 1
	}, "CMD journaled")
	f.fill(t, 0)
	require.NoError(t, os.WriteFile(filepath.Join(f.marks, "go"), nil, 0o600))
	f.waitDaemons(t, 3)
	f.settleRun(t, sup, 3)
	return f.recoverJSON(t, e, "", "--grace", "2s")
}

// faultOneFreePage: exactly one page is free when run starts. Before: CMD's
// intent record took it, the live update failed (logged) and supervision
// went on; after a crash, the subjectless intent was retired as stale.
func faultOneFreePage(t *testing.T, e *env, f *fault) (int, string) {
	f.mount(t, "size=512k")
	f.fill(t, 1)
	sup := f.run(t, e, "", daemons+`
spawn 1
: > "$K/started"
exec sleep 100000`)
	// run may fail closed before CMD could spawn anything.
	waitUntil(t, []string{f.marks}, sup, func() bool { return sup.exited() || f.exists("d.1")() }, "the daemon, or run's end")
	f.settleRun(t, sup, 1)
	return f.recoverJSON(t, e, "", "--grace", "2s")
}

// faultFDLimitTree: run at RLIMIT_NOFILE 24 (soft and hard, so the runtime
// cannot raise it) with a tree of 49 daemons. The supervisor holds about 19
// descriptors of its own (the root, its parent, records/, leases/, the
// lease, the cgroup, the spawner's and CMD's pidfds, the runtime's poller
// and cgroup files), so this leaves it a handful for 49 daemons. Before (at
// 20, when the supervisor held fewer): 2 of 49 were journaled, silently,
// and recovery exited 0 with 47 alive.
func faultFDLimitTree(t *testing.T, e *env, f *fault) (int, string) {
	f.mount(t, "size=8m")
	sup := f.run(t, e, "24", daemons+`
spawn 49
exec sleep 100000`)
	f.waitDaemons(t, 49)
	f.settleRun(t, sup, 49)
	return f.recoverJSON(t, e, "", "--grace", "2s")
}

// faultFDSoftLimit: run with a soft limit of 20 under a hard one of 4096:
// the runtime raises run's own soft limit (so the 49 daemons are journaled)
// and CMD still gets 20, as its caller set.
func faultFDSoftLimit(t *testing.T, e *env, f *fault) (int, string) {
	f.mount(t, "size=8m")
	sup := f.run(t, e, "20:4096", daemons+`
ulimit -n > "$K/nofile"
spawn 49
exec sleep 100000`)
	f.waitDaemons(t, 49)
	b, err := os.ReadFile(filepath.Join(f.marks, "nofile"))
	require.NoError(t, err)
	assert.Equal(t, "20", strings.TrimSpace(string(b)), "CMD's soft descriptor limit")
	waitUntil(t, []string{filepath.Join(f.root, "records")}, sup, func() bool { return f.journaled("fault descendant") == 49 }, "49 daemons journaled")
	sup.kill()
	return f.recoverJSON(t, e, "", "--grace", "2s")
}

// faultIntentCrash: a participant publishes an intent record, starts a
// daemon and is SIGKILLed before it can record it. Before: the subjectless
// intent was judged stale and retired with exit 0 while the daemon lived.
func faultIntentCrash(t *testing.T, e *env, f *fault) (int, string) {
	f.mount(t, "size=512k")
	c := e.child(t, "intenter", childOpts{env: tagEnv(f.tag, "OJ_REL_ROOT="+f.root)})
	c.waitReady(t, "daemon")
	c.kill()
	code, out := f.recoverJSON(t, e, "", "--grace", "2s")
	assert.Equal(t, 3, code, "an intent whose subject is unknown is retained: %s", out)
	assert.Contains(t, out, "before its intent record named a subject")
	return code, out
}

// childIntenter publishes an intent record for a process, starts a
// daemonized sleeper, reports "daemon" and waits to be SIGKILLed.
func childIntenter() int {
	r, err := journal.Open(os.Getenv("OJ_REL_ROOT"))
	if err != nil {
		return childFail("intenter", err)
	}
	if _, err := r.Lease(); err != nil {
		return childFail("intenter", err)
	}
	self, err := owner.Self()
	if err != nil {
		return childFail("intenter", err)
	}
	if err := r.Publish(context.Background(), &journal.Record{Kind: journal.KindProcess, Label: "intent", Owner: self, Phase: journal.PhaseIntent}); err != nil {
		return childFail("intenter", err)
	}
	d := exec.Command("sleep", "100000")
	d.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := d.Start(); err != nil {
		return childFail("intenter", err)
	}
	if err := testroot.Ready("daemon", []byte(strconv.Itoa(d.Process.Pid))); err != nil {
		return childFail("intenter", err)
	}
	select {}
}

// liveAndDead publishes, in a fresh tmpfs root, an orphan process, a
// record in use (its owner is this test process), an orphan tmux server
// with its socket, a stale record with a scratch directory and a
// subjectless intent of a dead owner; it returns the live subjects.
func (f *fault) liveAndDead(t *testing.T, e *env) []owner.Identity {
	t.Helper()
	j, err := journal.Open(f.root)
	require.NoError(t, err)
	defer j.Close()
	dead := e.deadIdentity(t)
	self, err := owner.Self()
	require.NoError(t, err)
	ctx := context.Background()
	var live []owner.Identity
	sleeper := func() owner.Identity {
		cmd := exec.Command("sleep", "100000")
		cmd.Env = tagEnv(f.tag)
		p := e.spawn(t, cmd)
		id, err := owner.Of(p.pid())
		require.NoError(t, err)
		live = append(live, id)
		return id
	}
	orphan, inUse := sleeper(), sleeper()
	require.NoError(t, j.Publish(ctx, &journal.Record{Kind: journal.KindProcess, Label: "orphan", Subject: &orphan, Owner: dead, Phase: journal.PhaseLive}))
	require.NoError(t, j.Publish(ctx, &journal.Record{Kind: journal.KindProcess, Label: "in use", Subject: &inUse, Owner: self, Phase: journal.PhaseLive}))
	sock := filepath.Join(f.root, "t.sock")
	cmd := e.tmuxCmd(sock, "new-session", "-d", "-s", "f", "sleep 100000")
	cmd.Env = append(cmd.Env, tagEnv(f.tag)...)
	out, err := e.output(cmd)
	require.NoError(t, err, "%s", out)
	tid := tmuxServer(t, e, sock)
	live = append(live, tid)
	require.NoError(t, j.Publish(ctx, &journal.Record{Kind: journal.KindTmux, Label: "orphan tmux", Subject: &tid, Owner: dead, Sockets: []string{"t.sock"}, Phase: journal.PhaseLive}))
	require.NoError(t, scratch(j, "pc"))
	require.NoError(t, j.Publish(ctx, &journal.Record{Kind: journal.KindPath, Label: "stale path", Owner: dead, Paths: []string{"pc"}, Phase: journal.PhaseLive}))
	require.NoError(t, j.Publish(ctx, &journal.Record{Kind: journal.KindProcess, Label: "dead intent", Owner: dead, Phase: journal.PhaseIntent}))
	return live
}

// requireEnded checks that every live subject of the fixture was ended.
func requireEnded(t *testing.T, live []owner.Identity, out string) {
	t.Helper()
	for _, id := range live {
		assert.Equal(t, owner.Dead, owner.Check(id).State, "pid %d outlived the teardown:\n%s", id.PID, out)
	}
}

// faultReadOnlyRoot: `recover --all --json` on a root remounted read-only,
// with live and dead records. Before: it had to create `closing` first,
// exited 1, ended nothing and printed no JSON.
func faultReadOnlyRoot(t *testing.T, e *env, f *fault) (int, string) {
	f.mount(t, "size=1m")
	live := f.liveAndDead(t, e)
	f.remount(t, true)
	code, out := f.recoverJSON(t, e, "", "--all", "--grace", "2s")
	assert.Equal(t, 3, code, "what a read-only root keeps is retained: %s", out)
	assert.Contains(t, out, "could not be blocked by the closing marker")
	assert.Contains(t, out, "read-only file system")
	requireEnded(t, live, out)
	// Writable again, the root goes (the intent stays retained: exit 3).
	f.remount(t, false)
	defer func() {
		c2, out2 := f.recoverJSON(t, e, "", "--all", "--grace", "2s")
		assert.Equal(t, 3, c2, "%s", out2)
	}()
	return code, out
}

// faultInodeFullRoot: `recover --all --json` on a root whose file system
// has no inode left (the closing marker cannot be created).
func faultInodeFullRoot(t *testing.T, e *env, f *fault) (int, string) {
	f.mount(t, "size=4m,nr_inodes=64")
	live := f.liveAndDead(t, e)
	f.fillInodes(t)
	code, out := f.recoverJSON(t, e, "", "--all", "--grace", "2s")
	assert.Equal(t, 3, code, "the subjectless intent is retained: %s", out)
	assert.Contains(t, out, "could not be blocked by the closing marker")
	requireEnded(t, live, out)
	return code, out
}

// faultLowFDRecover: 40 orphans that trap SIGTERM and need 0.5 s to exit,
// recovered at RLIMIT_NOFILE 24 with a 3 s grace. Before: failed pidfd
// waits (EMFILE) led to an immediate SIGKILL logged as "still running after
// 3s". Now none is killed early: each finishes its shutdown.
func faultLowFDRecover(t *testing.T, e *env, f *fault) (int, string) {
	const n = 40
	f.mount(t, "size=2m")
	j, err := journal.Open(f.root)
	require.NoError(t, err)
	dead := e.deadIdentity(t)
	var ids []owner.Identity
	for i := 0; i < n; i++ {
		// GORACE: a race-enabled trapper would sleep a second more at exit.
		c := e.child(t, "trapper", childOpts{env: tagEnv(f.tag, "OJ_REL_MARKS="+f.marks, "GORACE=atexit_sleep_ms=0")})
		c.waitReady(t, "trapping")
		id, err := owner.Of(c.pid())
		require.NoError(t, err)
		ids = append(ids, id)
		require.NoError(t, j.Publish(context.Background(), &journal.Record{Kind: journal.KindProcess, Label: "trapper", Subject: &id, Owner: dead, Phase: journal.PhaseLive}))
	}
	j.Close()
	code, out := f.recoverJSON(t, e, "24", "--grace", "3s")
	assert.NotContains(t, out, "SIGKILL to", "an orphan was SIGKILLed before its grace elapsed")
	for _, id := range ids {
		_, err := os.Stat(filepath.Join(f.marks, "graceful."+strconv.Itoa(id.PID)))
		assert.NoError(t, err, "trapper %d did not finish its shutdown", id.PID)
	}
	return code, out
}

// childTrapper catches SIGTERM and takes 0.5 s to shut down, then writes
// graceful.PID in OJ_REL_MARKS and exits 0.
func childTrapper() int {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	if err := testroot.Ready("trapping", nil); err != nil {
		return childFail("trapper", err)
	}
	<-ch
	time.Sleep(500 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(os.Getenv("OJ_REL_MARKS"), "graceful."+strconv.Itoa(os.Getpid())), nil, 0o600); err != nil {
		return childFail("trapper", err)
	}
	return 0
}
