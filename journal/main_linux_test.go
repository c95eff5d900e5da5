package journal

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
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
)

// The children are this test binary re-executed (see testroot.Main). Each
// opens the root $OJ_ROOT, reports readiness files, and takes commands from
// stdin, one per line; EOF means "finish".
//
// The test process is a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER):
// the daemons that children start re-parent to it, and the tests reap them.
func TestMain(m *testing.M) {
	if os.Getenv("OJ_TEST_CHILD") == "" {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "journal test: PR_SET_CHILD_SUBREAPER:", err)
			os.Exit(1)
		}
	}
	testroot.Main(m, map[string]func() int{
		"publish":  childPublish,
		"admit":    childAdmit,
		"lease":    childLease,
		"teardown": childTeardown,
	})
}

func childFail(format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "child: "+format+"\n", a...)
	return 1
}

func childReady(name string, v any) {
	b, _ := json.Marshal(v)
	if err := testroot.Ready(name, b); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
}

// blockForever parks the child until it is killed. (A bare select{} would
// be reported as a deadlock by the runtime.)
func blockForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func childRecord(self owner.Identity, label string) *Record {
	return &Record{Kind: KindProcess, Label: label, Owner: self, Subject: &self, Phase: PhaseLive}
}

// childPublish publishes $OJ_N records (forever if 0) labelled
// $OJ_LABEL-<i>. With $OJ_GO it waits for a line on stdin first; with
// $OJ_STOP it stops (reports "stopped", then blocks until killed) at that
// step of its first publish.
func childPublish() int {
	r, err := Open(os.Getenv("OJ_ROOT"))
	if err != nil {
		return childFail("%v", err)
	}
	self, err := owner.Self()
	if err != nil {
		return childFail("%v", err)
	}
	if stop := os.Getenv("OJ_STOP"); stop != "" {
		publishHook = func(step string) {
			if step == stop {
				childReady("stopped", self)
				blockForever()
			}
		}
	}
	n, _ := strconv.Atoi(os.Getenv("OJ_N"))
	label := os.Getenv("OJ_LABEL")
	childReady("up", self)
	if os.Getenv("OJ_GO") != "" {
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return childFail("waiting for go: %v", err)
		}
	}
	for i := 0; n <= 0 || i < n; i++ {
		if err := r.Publish(context.Background(), childRecord(self, label+"-"+strconv.Itoa(i))); err != nil {
			return childFail("publish %d: %v", i, err)
		}
		if i == 0 {
			childReady("first", self)
		}
	}
	childReady("done", self)
	return 0
}

// childAdmit holds one admission; "publish" publishes a record under it
// (reported as "published" with the record id or the error). EOF releases
// the admission and exits.
func childAdmit() int {
	r, err := Open(os.Getenv("OJ_ROOT"))
	if err != nil {
		return childFail("%v", err)
	}
	self, err := owner.Self()
	if err != nil {
		return childFail("%v", err)
	}
	adm, err := r.Admit(context.Background())
	if err != nil {
		return childFail("admit: %v", err)
	}
	if err := maybeSpawn(); err != nil {
		return childFail("%v", err)
	}
	childReady("admitted", self)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "publish":
			rec := childRecord(self, "admitted")
			res := childResult{}
			if err := adm.Publish(rec); err != nil {
				res.Err = err.Error()
			}
			res.ID = rec.ID
			childReady("published", res)
		default:
			return childFail("unknown command %q", sc.Text())
		}
	}
	adm.Done()
	return 0
}

// childLease takes the process's lease, reports "leased" and holds it until
// killed or EOF (then it exits without releasing: the kernel drops the lock
// and the lease file stays, free).
func childLease() int {
	r, err := Open(os.Getenv("OJ_ROOT"))
	if err != nil {
		return childFail("%v", err)
	}
	self, err := owner.Self()
	if err != nil {
		return childFail("%v", err)
	}
	if _, err := r.Lease(); err != nil {
		return childFail("lease: %v", err)
	}
	if err := maybeSpawn(); err != nil {
		return childFail("%v", err)
	}
	childReady("leased", self)
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// childTeardown waits for a line on stdin, then runs teardown and reports the
// outcome as "result".
func childTeardown() int {
	r, err := Open(os.Getenv("OJ_ROOT"))
	if err != nil {
		return childFail("%v", err)
	}
	childReady("up", nil)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return childFail("waiting for go: %v", err)
	}
	var res childResult
	if err := teardown(context.Background(), r); err != nil {
		res.Err = err.Error()
	}
	childReady("result", res)
	return 0
}

// maybeSpawn starts, with $OJ_SPAWN set, a grandchild (sleep) that outlives
// the child, and reports it as "grandchild": whatever the child has open must
// not leak into it (close-on-exec).
func maybeSpawn() error {
	if os.Getenv("OJ_SPAWN") == "" {
		return nil
	}
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		return err
	}
	id, err := owner.Of(cmd.Process.Pid)
	if err != nil {
		return err
	}
	childReady("grandchild", id)
	return nil
}

type childResult struct {
	ID  string `json:"id,omitempty"`
	Err string `json:"err,omitempty"`
}

// teardown is the sequence of a participant that ends a run: mark closing,
// wait for admitted creators, remove the root. A root another participant
// removed meanwhile is success.
func teardown(ctx context.Context, r *Root) error {
	if err := r.MarkClosing(); err != nil {
		return err
	}
	x, err := r.LockExclusive(ctx)
	if err != nil {
		if errors.Is(err, ErrClosing) && r.Removed() {
			return nil
		}
		return err
	}
	defer x.Unlock()
	return x.RemoveRoot()
}

// identityOf decodes the identity a child reported.
func identityOf(t *testing.T, b []byte) owner.Identity {
	t.Helper()
	var id owner.Identity
	require.NoError(t, json.Unmarshal(b, &id), "%s", b)
	require.NotZero(t, id.PID)
	return id
}

// startChild starts a child on root with extra environment.
func startChild(t *testing.T, name string, r *Root, env ...string) *testroot.Child {
	t.Helper()
	return testroot.Start(t, name, append([]string{"OJ_ROOT=" + r.Path()}, env...)...)
}
