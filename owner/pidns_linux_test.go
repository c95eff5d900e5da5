package owner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// The PID namespace tests start children in a new PID namespace with a
// procfs of its own (unshare --pid --fork --mount-proc): the child is that
// namespace's init, and PIDs it records are numbers only that namespace
// knows.

// nsResult is what the namespace children report.
type nsResult struct {
	Holder  Identity `json:"holder"`
	Subject Identity `json:"subject"`
	// For ns-check: the verdicts on OJ_ID as recorded, and with its
	// namespace stripped (as a version 1 record carries it).
	State, Reason             string
	LegacyState, LegacyReason string
	OpenErr, GroupErr         string
	OpenUnverified            bool
	GroupUnverified           bool
}

// childNSHolder runs as init of a new PID namespace: it starts a subject
// (ns-sleep, leading a process group of its own), reports both identities
// as read inside the namespace, and reaps the subject when it ends. It
// exits when its stdin closes.
func childNSHolder() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "ns-holder:", err); return 1 }
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	nested := os.Getenv("OJ_NS_NESTED") != ""
	if nested {
		// The subject runs one namespace further down, under unshare.
		wrap := strings.Fields(os.Getenv("OJ_NS_NESTED"))
		cmd = exec.Command(wrap[0], append(wrap[1:], exe, "-test.run=^$")...)
	}
	cmd.Env = append(os.Environ(), "OJ_TEST_CHILD=ns-sleep")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var ready io.Reader
	if nested {
		// The sleeper says it runs with a line on its stdout.
		cmd.Env = append(cmd.Env, "OJ_NS_SLEEP_READY=1")
		if ready, err = cmd.StdoutPipe(); err != nil {
			return fail(err)
		}
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	go cmd.Wait()
	var res nsResult
	if res.Holder, err = Self(); err != nil {
		return fail(err)
	}
	pid := cmd.Process.Pid
	if nested {
		if pid, err = nestedChild(pid, ready); err != nil {
			return fail(err)
		}
	}
	if res.Subject, err = Of(pid); err != nil {
		return fail(err)
	}
	b, _ := json.Marshal(res)
	if err := testroot.Ready("result", b); err != nil {
		return fail(err)
	}
	for testroot.Lines().Scan() {
	}
	return 0
}

// childNSSleep blocks until it is signalled (the Go runtime's default
// action for SIGTERM ends it). With OJ_NS_SLEEP_READY it first writes a
// line to its stdout.
func childNSSleep() int {
	if os.Getenv("OJ_NS_SLEEP_READY") != "" {
		fmt.Println("sleeping")
	}
	select {}
}

// nestedChild waits for the ready line of the sleeper under unshare (pid)
// and returns the sleeper's PID in this namespace: the child of unshare.
func nestedChild(pid int, ready io.Reader) (int, error) {
	if _, err := bufio.NewReader(ready).ReadString('\n'); err != nil {
		return 0, fmt.Errorf("sleeper under unshare: %w", err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, fmt.Errorf("unshare (pid %d) has children %q", pid, f)
	}
	return strconv.Atoi(f[0])
}

// childNSCheck runs inside a new PID namespace and judges the identity
// OJ_ID, recorded outside it.
func childNSCheck() int {
	var id Identity
	if err := json.Unmarshal([]byte(os.Getenv("OJ_ID")), &id); err != nil {
		fmt.Fprintln(os.Stderr, "ns-check:", err)
		return 1
	}
	var res nsResult
	v := Check(id)
	res.State, res.Reason = v.State.String(), v.Reason
	legacy := id
	legacy.PIDNS = 0
	v = Check(legacy)
	res.LegacyState, res.LegacyReason = v.State.String(), v.Reason
	if p, err := Open(id); err != nil {
		res.OpenErr, res.OpenUnverified = err.Error(), errors.Is(err, ErrUnverifiable)
	} else {
		p.Close()
		res.OpenErr = "opened"
	}
	if _, err := GroupAliveOf(id); err != nil {
		res.GroupErr, res.GroupUnverified = err.Error(), errors.Is(err, ErrUnverifiable)
	}
	b, _ := json.Marshal(res)
	if err := testroot.Ready("result", b); err != nil {
		fmt.Fprintln(os.Stderr, "ns-check:", err)
		return 1
	}
	return 0
}

// nsPIDs returns the NSpid line of a process of this namespace.
func nsPIDs(t *testing.T, pid int) []int {
	t.Helper()
	st, ok := readNSStatus(pid)
	require.True(t, ok, "status of pid %d", pid)
	return st.nspid
}

// TestPIDNamespaceChildRecordParentRecovers: an identity recorded inside a
// child PID namespace is judged in that namespace from the parent: alive
// through the unique translated match, signalled through a handle on the
// right process, dead once it exited. Forged variants (another namespace,
// the host's PID in the child's namespace, another start time) are never
// alive and never opened, and the subject survives them.
func TestPIDNamespaceChildRecordParentRecovers(t *testing.T) {
	self, err := selfPIDNS()
	require.NoError(t, err)
	c := testroot.StartOpts(t, "ns-holder", testroot.Options{Wrap: testroot.Unshare(t)})
	var res nsResult
	require.NoError(t, json.Unmarshal(c.WaitReady("result"), &res))
	subj, holder := res.Subject, res.Holder
	require.NotZero(t, subj.PIDNS)
	require.NotEqual(t, self, subj.PIDNS, "the child must run in a PID namespace of its own")
	assert.Equal(t, 1, holder.PID, "the holder is its namespace's init")

	// Read as a version 1 record would be (no namespace): the PID names
	// another process here, or none. This is what recovery did before.
	legacy := subj
	legacy.PIDNS = 0
	assert.Equal(t, Dead, Check(legacy).State, Check(legacy).Reason)

	v := Check(subj)
	require.Equal(t, Alive, v.State, v.Reason)
	assert.Contains(t, v.Reason, "here")
	assert.Equal(t, Alive, Check(holder).State, Check(holder).Reason)
	alive, err := GroupAliveOf(subj)
	require.NoError(t, err)
	assert.True(t, alive, "the subject leads a live group in its namespace")
	alive, err = LiveElsewhere(subj.PID, subj.StartTime)
	require.NoError(t, err)
	assert.True(t, alive, "a process below this namespace is called %d there", subj.PID)
	alive, err = LiveElsewhere(subj.PID, ^uint64(0))
	require.NoError(t, err)
	assert.False(t, alive, "no process started at the end of time")

	forged := map[string]func(id *Identity){
		"another namespace":                func(id *Identity) { id.PIDNS = self },
		"unknown namespace":                func(id *Identity) { id.PIDNS = 4026539999 },
		"the PID as this namespace has it": nil, // filled below
		"another start time":               func(id *Identity) { id.StartTime++ },
	}
	p, err := Open(subj)
	require.NoError(t, err)
	defer p.Close()
	hostPID := p.Identity().PID
	require.NotEqual(t, subj.PID, hostPID)
	nspid := nsPIDs(t, hostPID)
	require.Equal(t, subj.PID, nspid[len(nspid)-1], "the handle is on the process the namespace calls %d", subj.PID)
	// Start time (field 22 of /proc/PID/stat) counts from boot, not from
	// the namespace: the child's procfs and ours give the same value.
	info, err := readProc(hostPID)
	require.NoError(t, err)
	assert.Equal(t, subj.StartTime, info.startTime, "start time read inside the namespace and here")
	forged["the PID as this namespace has it"] = func(id *Identity) { id.PID = hostPID }
	for name, edit := range forged {
		t.Run(name, func(t *testing.T) {
			id := subj
			edit(&id)
			v := Check(id)
			assert.NotEqual(t, Alive, v.State, v.Reason)
			q, err := Open(id)
			if err == nil {
				q.Close()
			}
			require.Error(t, err, "a forged identity must not open a handle")
			assert.Equal(t, Alive, Check(subj).State, "the subject survives")
		})
	}

	require.NoError(t, p.Signal(syscall.SIGTERM))
	ctx, cancel := context.WithTimeout(context.Background(), testroot.Timeout)
	defer cancel()
	require.NoError(t, p.Wait(ctx))
	v = Check(subj)
	assert.Equal(t, Dead, v.State, v.Reason)
	assert.Equal(t, Alive, Check(holder).State, "the namespace's init was not touched")
	c.CloseStdin()
	require.NoError(t, c.Wait())
	// The namespace is gone with its init: everything recorded in it is
	// dead, and this recoverer (in the initial namespace) can tell.
	// (A namespace made meanwhile by a test running beside this one may
	// reuse the freed inode: its pid 1 then started at another time.)
	if self == pidNSInitIno {
		v = Check(holder)
		assert.Equal(t, Dead, v.State, v.Reason)
		assert.Regexp(t, "no process of that namespace is left|reused", v.Reason)
	}
}

// TestPIDNamespaceNested: the writer's namespace is a child of ours and the
// subject lives one namespace below the writer's; the PID the writer
// recorded is the subject's PID in the writer's namespace. The parent
// finds it among the processes of the namespaces below the recorded one
// (NS_GET_PARENT), verifies it and ends it.
func TestPIDNamespaceNested(t *testing.T) {
	wrap := testroot.Unshare(t)
	c := testroot.StartOpts(t, "ns-holder", testroot.Options{Wrap: wrap, Env: []string{"OJ_NS_NESTED=" + strings.Join(wrap, " ")}})
	var res nsResult
	require.NoError(t, json.Unmarshal(c.WaitReady("result"), &res))
	subj, holder := res.Subject, res.Holder
	require.Equal(t, holder.PIDNS, subj.PIDNS, "recorded in the writer's namespace")
	v := Check(subj)
	require.Equal(t, Alive, v.State, v.Reason)
	p, err := Open(subj)
	require.NoError(t, err)
	defer p.Close()
	nspid := nsPIDs(t, p.Identity().PID)
	require.Len(t, nspid, 3, "the subject is two namespaces below the test")
	assert.Equal(t, subj.PID, nspid[1], "the handle is on the process the writer's namespace calls %d", subj.PID)
	// Under unshare the subject does not lead a group of its own (unshare
	// does): no group by its PID lives in the writer's namespace.
	alive, err := GroupAliveOf(subj)
	require.NoError(t, err)
	assert.False(t, alive)
	require.NoError(t, p.Signal(syscall.SIGKILL))
	ctx, cancel := context.WithTimeout(context.Background(), testroot.Timeout)
	defer cancel()
	require.NoError(t, p.Wait(ctx))
	assert.Equal(t, Alive, Check(holder).State, "the writer's init was not touched")
	t.Logf("nested: %s", v.Reason)
}

// TestPIDNamespaceParentRecordChildRecovers: an identity recorded in the
// parent namespace cannot be seen from a child namespace: unknown (never
// dead), no handle, no group verdict. Without its namespace (a version 1
// record), the same identity was judged dead there.
func TestPIDNamespaceParentRecordChildRecovers(t *testing.T) {
	id, err := Self()
	require.NoError(t, err)
	b, err := json.Marshal(id)
	require.NoError(t, err)
	c := testroot.StartOpts(t, "ns-check", testroot.Options{Wrap: testroot.Unshare(t), Env: []string{"OJ_ID=" + string(b)}})
	var res nsResult
	require.NoError(t, json.Unmarshal(c.WaitReady("result"), &res))
	require.NoError(t, c.Wait())
	assert.Equal(t, "unknown", res.State, res.Reason)
	assert.Contains(t, res.Reason, "not visible from PID namespace")
	assert.True(t, res.OpenUnverified, "open: %s", res.OpenErr)
	assert.True(t, res.GroupUnverified, "group: %s", res.GroupErr)
	assert.Equal(t, "dead", res.LegacyState, "without a namespace the parent's pid %d looks dead here: %s", id.PID, res.LegacyReason)
	assert.Equal(t, Alive, Check(id).State)
}

// childNSSelf reports what Self says in a PID namespace whose /proc is the
// parent's.
func childNSSelf() int {
	var res childResult
	id, err := Self()
	res.setErr(err)
	if err == nil {
		res.State = fmt.Sprintf("pid %d", id.PID)
	}
	return report(res)
}

// TestPIDNamespaceForeignProcRefused: in a PID namespace that kept the
// parent's /proc (unshare without --mount-proc), every PID read there names
// another process (the namespace's PID 2 is the host's kthreadd). Identities
// are refused there rather than recorded wrong: before, `publish --pid 2`
// in such a container recorded the host's kthreadd as its subject.
func TestPIDNamespaceForeignProcRefused(t *testing.T) {
	wrap := testroot.Unshare(t)
	var noMountProc []string
	for _, a := range wrap {
		if a != "--mount-proc" {
			noMountProc = append(noMountProc, a)
		}
	}
	c := testroot.StartOpts(t, "ns-self", testroot.Options{Wrap: noMountProc})
	res := decodeResult(t, c.WaitReady("result"))
	require.NoError(t, c.Wait())
	assert.True(t, res.Unverified, "Self must fail as unverifiable: %+v", res)
	assert.Contains(t, res.Err, "/proc belongs to another PID namespace")
}
