package reliability

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// The crash matrix: every marked stage of a participant's life, SIGKILL
// there, then one recoverer (alternately the library in orphans-only mode,
// as a daemon starting up would, and `ownerjournal recover --all`, as the
// runner ending the run would) must leave nothing behind.
var (
	// workerStages: the creation gate and the atomic publish (childWorker).
	workerStages = []string{"admit:held", "admit:intent", "admit:created",
		"publish:written", "publish:renamed", "publish:synced", "worker:steady"}
	// runStages: the `ownerjournal run` supervisor.
	runStages = []string{"run:started", "run:journaled", "run:ending"}
	// recoverStages: a recoverer killed half-way (childRecoverer).
	recoverStages = []string{"recover:classified", "recover:signalled", "recover:retired", "recover:removing"}
)

func testCrashMatrix(t *testing.T, e *env) {
	type stage struct {
		name string
		fn   func(t *testing.T, e *env, rs *runState)
	}
	var stages []stage
	for _, s := range workerStages {
		stages = append(stages, stage{s, crashWorker})
	}
	for _, s := range runStages {
		stages = append(stages, stage{s, crashRun})
	}
	for _, s := range recoverStages {
		stages = append(stages, stage{s, crashRecoverer})
	}
	for _, s := range e2eStages(t, e) {
		stages = append(stages, stage{s, crashE2E})
	}
	require.GreaterOrEqual(t, len(stages), 10)
	for _, st := range stages {
		for i := 0; i < *flagRuns; i++ {
			t.Run(fmt.Sprintf("%s/%d", st.name, i), func(t *testing.T) {
				rs := e.newRun(t, "crash-"+st.name, i)
				rs.stage = st.name
				st.fn(t, e, rs)
				leaked := e.recoverAndCount(t, rs, i%2 == 1)
				wrong := e.checkBystanders(t, st.name)
				sum.add(1, leaked, wrong, 0)
			})
		}
	}
}

// runState is one scenario run: its private directory DIR (the root is
// DIR/r), the tag its processes carry, and the cgroups it may leave.
type runState struct {
	dir, root, tag, stage string
	i                     int
	cgroups               []string // globs of cgroups the run may create
}

// watchCgroups adds the cgroups an `ownerjournal run` supervisor pid may
// create (internal/cgroup names them oj-PID-RAND) to what must not be left.
func (rs *runState) watchCgroups(pid int) {
	rs.cgroups = append(rs.cgroups, fmt.Sprintf("/sys/fs/cgroup/oj-%d-*", pid), fmt.Sprintf("/sys/fs/cgroup/*/oj-%d-*", pid))
}

// newRun prepares a run; whatever a failed run leaves is ended at cleanup.
func (e *env) newRun(t *testing.T, name string, i int) *runState {
	t.Helper()
	dir, root := runDir(t)
	rs := &runState{dir: dir, root: root, i: i, tag: fmt.Sprintf("%s-%d-%d", name, i, os.Getpid())}
	t.Cleanup(func() { e.killLeaked(leakedProcs(rs.tag, rs.dir)) })
	return rs
}

// tagEnv is the environment of a scenario's processes.
func tagEnv(tag string, kv ...string) []string {
	return append([]string{tagVar + "=" + tag}, kv...)
}

func crashWorker(t *testing.T, e *env, rs *runState) {
	w := e.child(t, "worker", childOpts{env: tagEnv(rs.tag, "OJ_REL_ROOT="+rs.root, "OJ_REL_STAGE="+rs.stage, "OJ_REL_TMUX="+e.tmux)})
	w.waitReady(t, "stage")
	w.kill()
}

// runScript is CMD under `ownerjournal run`: a daemonized tmux server that
// it publishes with `ownerjournal publish`, a background child, and a TERM
// trap that records the start of the tree's end and keeps running.
const runScript = `
: > "$M/started"
[ "$STAGE" = run:started ] && exec sleep 100000
tmux -S "$R/r.sock" -f /dev/null new-session -d -s r 'sleep 100000' || exit 1
pid=$(tmux -S "$R/r.sock" display-message -p '#{pid}') || exit 1
"$OJ" publish --root "$R" --pid "$pid" --kind tmux --socket r.sock --label run-tmux >/dev/null || exit 1
sleep 100000 &
trap ': > "$M/term"' TERM
: > "$M/spawned"
while :; do sleep 5 & wait $!; done
`

func crashRun(t *testing.T, e *env, rs *runState) {
	stage, tag, root := rs.stage, rs.tag, rs.root
	m := filepath.Join(rs.dir, "m")
	require.NoError(t, os.Mkdir(m, 0o700))
	cmd := exec.Command(e.cli, "run", "--root", root, "--label", "run", "--grace", "2s", "--", "sh", "-c", runScript)
	cmd.Env = append(withoutTMUX(os.Environ()), tagEnv(tag, "M="+m, "R="+root, "OJ="+e.cli, "STAGE="+stage)...)
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(e.tmux)+":/usr/bin:/bin")
	sup := e.spawn(t, cmd)
	rs.watchCgroups(sup.pid())
	exists := func(name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(m, name)); return err == nil }
	}
	waitUntil(t, []string{m}, sup, exists("started"), "CMD started")
	if stage != "run:started" {
		// Journaled: the published tmux server, and the two descendants
		// the supervisor adopted or saw for two scans.
		recs := filepath.Join(root, "records")
		waitUntil(t, []string{m, recs}, sup, func() bool {
			if !exists("spawned")() {
				return false
			}
			j, err := journal.Open(root)
			if err != nil {
				return false
			}
			defer j.Close()
			s, err := j.Scan()
			if err != nil {
				return false
			}
			tmuxRec, desc := false, 0
			for _, r := range s.Records {
				switch {
				case r.Label == "run-tmux":
					tmuxRec = true
				case r.Label != "run" && strings.HasPrefix(r.Label, "run"):
					desc++ // the supervisor's label for a descendant
				}
			}
			return tmuxRec && desc >= 2
		}, "descendants journaled")
	}
	if stage == "run:ending" {
		require.NoError(t, sup.signal(syscall.SIGTERM))
		waitUntil(t, []string{m}, sup, exists("term"), "the tree's end begun")
	}
	sup.kill()
}

// recoverFixture fills a root with what a dead owner left: an orphan process
// group with a socket and a scratch tree, an orphan tmux server, a stale
// path record and a dead writer's temp file.
func (e *env) recoverFixture(t *testing.T, tag, root string) {
	t.Helper()
	dead := e.deadIdentity(t)
	j, err := journal.Open(root)
	require.NoError(t, err)
	defer j.Close()
	ctx := context.Background()

	l := e.child(t, "listener", childOpts{env: tagEnv(tag, "OJ_REL_SOCK="+filepath.Join(root, "a.sock")), pgid: true, stdout: true})
	line, err := readLine(l.stdout)
	require.NoError(t, err)
	require.Equal(t, "ok", line)
	lid, err := owner.Of(l.pid())
	require.NoError(t, err)
	require.NoError(t, scratch(j, "pa"))
	require.NoError(t, j.Publish(ctx, &journal.Record{Kind: journal.KindProcess, Label: "orphan group", Subject: &lid, PGID: lid.PID,
		Owner: dead, Sockets: []string{"a.sock"}, Paths: []string{"pa"}, Phase: journal.PhaseLive}))

	cmd := e.tmuxCmd(filepath.Join(root, "b.sock"), "new-session", "-d", "-s", "b", "sleep 100000")
	cmd.Env = append(cmd.Env, tagEnv(tag)...)
	out, err := e.output(cmd)
	require.NoError(t, err, "%s", out)
	tid := tmuxServer(t, e, filepath.Join(root, "b.sock"))
	require.NoError(t, j.Publish(ctx, &journal.Record{Kind: journal.KindTmux, Label: "orphan tmux", Subject: &tid,
		Owner: dead, Sockets: []string{"b.sock"}, Phase: journal.PhaseLive}))

	require.NoError(t, scratch(j, "pc"))
	require.NoError(t, j.Publish(ctx, &journal.Record{Kind: journal.KindPath, Label: "stale path", Owner: dead,
		Paths: []string{"pc"}, Phase: journal.PhaseLive}))

	// What a writer SIGKILLed between write and rename leaves (renameio's
	// temp name, ".<id>.json<digits>").
	require.NoError(t, j.Dir().WriteFile("records/."+journal.NewID(dead)+".json4242", []byte("{"), 0o600))
}

func crashRecoverer(t *testing.T, e *env, rs *runState) {
	e.recoverFixture(t, rs.tag, rs.root)
	all := "0"
	if rs.i%2 == 0 {
		all = "1"
	}
	r := e.child(t, "recoverer", childOpts{env: tagEnv(rs.tag, "OJ_REL_ROOT="+rs.root, "OJ_REL_STAGE="+rs.stage, "OJ_REL_TMUX="+e.tmux, "OJ_REL_ALL="+all)})
	r.waitReady(t, "stage")
	r.kill()
}

// recoverAndCount runs the recoverer that must finish the job and returns
// how many processes, sockets and directories were left behind (and
// removes them, so that the next run starts clean).
func (e *env) recoverAndCount(t *testing.T, rs *runState, viaCLI bool) int {
	t.Helper()
	tag, root := rs.tag, rs.root
	if _, err := os.Lstat(root); err == nil {
		if viaCLI {
			cmd := exec.Command(e.cli, "recover", "--root", root, "--all", "--grace", "2s")
			cmd.Env = append(withoutTMUX(os.Environ()), tagEnv(tag)...)
			out, code, err := e.run(cmd)
			require.NoError(t, err)
			assert.Equal(t, 0, code, "ownerjournal recover --all:\n%s", out)
		} else {
			j, err := journal.Open(root)
			require.NoError(t, err)
			rep, err := recover.Run(context.Background(), j, recover.Options{Grace: 2 * time.Second, Tmux: e.tmux})
			j.Close()
			require.NoError(t, err)
			assert.True(t, rep.Clean() && rep.RootRemoved, "recovery (orphans only): %s", reportText(rep))
		}
	}
	return e.countLeaks(t, rs)
}

// countLeaks counts (and reports, and ends or removes) what a run left:
// processes, sockets, directories (the root, its tombstones, cgroups).
func (e *env) countLeaks(t *testing.T, rs *runState) int {
	t.Helper()
	// Give re-parented zombies back to the kernel before looking.
	e.reapOrphans()
	procs := settled(leakedProcs(rs.tag, rs.dir))
	e.reapOrphans()
	for _, pid := range procs {
		t.Errorf("leaked process %d: %s", pid, cmdline(pid))
	}
	e.killLeaked(procs)
	socks, dirs, what := leftovers(rs.dir, rs.root)
	for _, g := range rs.cgroups {
		m, _ := filepath.Glob(g)
		for _, cg := range m {
			dirs++
			what = append(what, "cgroup "+cg)
			os.Remove(cg)
		}
	}
	for _, w := range what {
		t.Errorf("leaked %s", w)
	}
	return len(procs) + socks + dirs
}

func reportText(rep *recover.Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "retained %d, root removed %v (%s)", rep.Retained, rep.RootRemoved, rep.RootKept)
	for _, a := range rep.Actions {
		fmt.Fprintf(&b, "\n  %s %s %s: %s; done %v; retained %q", a.Verdict, a.ID, a.Label, a.Reason, a.Done, a.Retained)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(&b, "\n  problem: %s", p)
	}
	return b.String()
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}
