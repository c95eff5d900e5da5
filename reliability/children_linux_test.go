package reliability

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// The re-executed children. They report through readiness files
// (testroot.Ready), stop at their marked stage (OJ_REL_STAGE) by publishing
// the readiness file "stage" and blocking until they are SIGKILLed, and
// otherwise exit 0 when their stdin closes.

// markAt returns the stage marker of a child: at the stage named by
// OJ_REL_STAGE it reports "stage" and blocks forever.
func markAt() func(string) {
	want := os.Getenv("OJ_REL_STAGE")
	return func(s string) {
		if s != want {
			return
		}
		if err := testroot.Ready("stage", []byte(s)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		select {}
	}
}

func childFail(who string, err error) int {
	fmt.Fprintf(os.Stderr, "%s: %v\n", who, err)
	return 1
}

// childWorker is a participant that creates resources through the gate: a
// tmux server (a daemon that outlives it) and a listener process group with
// a socket, each with a scratch directory, publishing an intent before and
// a live record after each creation. It stops at OJ_REL_STAGE.
func childWorker() int {
	mark := markAt()
	rootPath, tmuxBin := os.Getenv("OJ_REL_ROOT"), os.Getenv("OJ_REL_TMUX")
	r, err := journal.Open(rootPath)
	if err != nil {
		return childFail("worker", err)
	}
	self, err := owner.Self()
	if err != nil {
		return childFail("worker", err)
	}
	if _, err := r.Lease(); err != nil {
		return childFail("worker", err)
	}
	ctx := context.Background()
	adm, err := r.Admit(ctx)
	if err != nil {
		return childFail("worker", err)
	}
	mark("admit:held")
	rec := &journal.Record{Kind: journal.KindTmux, Label: "worker tmux", Owner: self, Phase: journal.PhaseIntent,
		Sockets: []string{"t.sock"}, Paths: []string{"scratch"}}
	if err := adm.Publish(rec); err != nil {
		return childFail("worker", err)
	}
	mark("admit:intent")
	if err := scratch(r, "scratch"); err != nil {
		return childFail("worker", err)
	}
	sock := rootPath + "/t.sock"
	if out, err := exec.Command(tmuxBin, "-S", sock, "-f", "/dev/null", "new-session", "-d", "-s", "w", "sleep 100000").CombinedOutput(); err != nil {
		return childFail("worker", fmt.Errorf("tmux: %v: %s", err, out))
	}
	mark("admit:created")
	out, err := exec.Command(tmuxBin, "-S", sock, "display-message", "-p", "#{pid}").Output()
	if err != nil {
		return childFail("worker", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	id, err := owner.Of(pid)
	if err != nil {
		return childFail("worker", err)
	}
	rec.Subject, rec.Phase = &id, journal.PhaseLive
	if strings.HasPrefix(os.Getenv("OJ_REL_STAGE"), "publish:") {
		publishHook = func(step string) { mark("publish:" + step) }
	}
	err = adm.Publish(rec)
	publishHook = func(string) {}
	if err != nil {
		return childFail("worker", err)
	}
	adm.Done()

	// A process group that outlives its creator, with a socket.
	adm, err = r.Admit(ctx)
	if err != nil {
		return childFail("worker", err)
	}
	rec2 := &journal.Record{Kind: journal.KindProcess, Label: "worker listener", Owner: self, Phase: journal.PhaseIntent,
		Sockets: []string{"l.sock"}, Paths: []string{"scratch2"}}
	if err := adm.Publish(rec2); err != nil {
		return childFail("worker", err)
	}
	if err := scratch(r, "scratch2"); err != nil {
		return childFail("worker", err)
	}
	exe, _ := os.Executable()
	l := exec.Command(exe, "-test.run=^$")
	l.Env = append(os.Environ(), "OJ_TEST_CHILD=listener", "OJ_REL_SOCK="+rootPath+"/l.sock")
	l.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	lout, err := l.StdoutPipe()
	if err != nil {
		return childFail("worker", err)
	}
	if err := l.Start(); err != nil {
		return childFail("worker", err)
	}
	if line, err := readLine(lout); err != nil || line != "ok" {
		return childFail("worker", fmt.Errorf("listener: %q %v", line, err))
	}
	lid, err := owner.Of(l.Process.Pid)
	if err != nil {
		return childFail("worker", err)
	}
	rec2.Subject, rec2.PGID, rec2.Phase = &lid, lid.PID, journal.PhaseLive
	if err := adm.Publish(rec2); err != nil {
		return childFail("worker", err)
	}
	adm.Done()
	mark("worker:steady")
	return childFail("worker", fmt.Errorf("unknown stage %q", os.Getenv("OJ_REL_STAGE")))
}

// scratch creates a scratch directory with content inside the root.
func scratch(r *journal.Root, name string) error {
	if err := r.Dir().MkdirAll(name+"/a/b", 0o700); err != nil {
		return err
	}
	return r.Dir().WriteFile(name+"/a/b/data", []byte("scratch\n"), 0o600)
}

// childListener leads a process group (it is started with Setpgid) with one
// more member, listens on OJ_REL_SOCK and says "ok" on stdout. SIGTERM ends
// it (the default action).
func childListener() int {
	gc := exec.Command("sleep", "100000")
	if err := gc.Start(); err != nil {
		return childFail("listener", err)
	}
	l, err := net.Listen("unix", os.Getenv("OJ_REL_SOCK"))
	if err != nil {
		return childFail("listener", err)
	}
	fmt.Println("ok")
	for {
		c, err := l.Accept()
		if err != nil {
			return childFail("listener", err)
		}
		c.Close()
	}
}

// childRecoverer replays a root (orphans only, or All with OJ_REL_ALL=1)
// and stops at OJ_REL_STAGE ("recover:classified", ...).
func childRecoverer() int {
	mark := markAt()
	stageHook = func(s string) { mark("recover:" + s) }
	r, err := journal.Open(os.Getenv("OJ_REL_ROOT"))
	if err != nil {
		return childFail("recoverer", err)
	}
	rep, err := recover.Run(context.Background(), r, recover.Options{
		All: os.Getenv("OJ_REL_ALL") == "1", Grace: 2 * time.Second, Tmux: os.Getenv("OJ_REL_TMUX"), Log: os.Stderr})
	if err != nil {
		return childFail("recoverer", err)
	}
	return childFail("recoverer", fmt.Errorf("finished without reaching stage %q: %+v", os.Getenv("OJ_REL_STAGE"), rep))
}

// catchable are the signals a helper records: every signal but SIGKILL and
// SIGSTOP (uncatchable: their effect is checked in /proc instead), SIGURG
// (the Go runtime's own preemption signal) and SIGCHLD (the helper has no
// children).
func catchable() []os.Signal {
	var sigs []os.Signal
	for s := syscall.Signal(1); s <= 64; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGURG, syscall.SIGCHLD, 32, 33:
			continue
		}
		sigs = append(sigs, s)
	}
	return sigs
}

// childSigCounter appends every signal it receives to OJ_REL_SIGFILE; it
// exits 0 when its stdin closes.
func childSigCounter() int {
	f, err := os.OpenFile(os.Getenv("OJ_REL_SIGFILE"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return childFail("sigcounter", err)
	}
	ch := make(chan os.Signal, 64)
	signal.Notify(ch, catchable()...)
	go func() {
		for s := range ch {
			fmt.Fprintf(f, "pid %d got %v\n", os.Getpid(), s)
		}
	}()
	if err := testroot.Ready("ready", []byte(strconv.Itoa(os.Getpid()))); err != nil {
		return childFail("sigcounter", err)
	}
	buf := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(buf); err != nil {
			return 0
		}
	}
}
