package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/internal/procenv"
	"github.com/ownerjournal/ownerjournal/owner"
)

// The Node figures compare the project's own Playwright suite
// (testdata/playwright) run two ways: with Playwright's webServer starting
// one e2e-server (playwright.webserver.config.js), and with ownerjournal's
// helper, where each worker owns its e2e-server through `ownerjournal run`
// (playwright.config.js). And a Jest run with and without the helper's
// globalSetup and globalTeardown (testdata/jest, jest.bench.config.js).

// nodeTimeout bounds one runner invocation; nothing waits for it to pass.
const nodeTimeout = 3 * time.Minute

// pwMode is one way to run the Playwright suite.
type pwMode struct {
	name   string
	config string
	// env returns the run's extra environment; xdg is the run's private
	// XDG_RUNTIME_DIR.
	env func(d *driver, xdg string) ([]string, error)
}

var pwModes = []pwMode{
	{"webserver", "playwright.webserver.config.js", (*driver).webServerEnv},
	{"ownerjournal", "playwright.config.js", func(*driver, string) ([]string, error) { return nil, nil }},
}

// nodeRun is one `npx --no -- ARGS...` in its own process group.
type nodeRun struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
	wall time.Duration
}

// nodeEnv is the driver's environment without what would steer a run
// (another root, the caller's runtime directory, CI), plus the run's own
// XDG_RUNTIME_DIR: a private base of roots and a marker that every process
// of the run inherits.
func (d *driver) nodeEnv(xdg string, extra ...string) []string {
	env := append(procenv.Scrubbed(os.Environ()), "XDG_RUNTIME_DIR="+xdg, "OWNERJOURNAL_BIN="+d.oj, "OJ_E2E_SERVER="+d.e2eServer, "NO_COLOR=1",
		"npm_config_update_notifier=false", "npm_config_logs_max=0")
	return append(env, extra...)
}

func (d *driver) startNode(dir string, env []string, args ...string) (*nodeRun, error) {
	r := &nodeRun{done: make(chan struct{})}
	r.cmd = exec.Command("npx", append([]string{"--no", "--"}, args...)...)
	r.cmd.Dir = dir
	r.cmd.Env = env
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t0 := time.Now()
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	pgid := r.cmd.Process.Pid
	go func() {
		r.cmd.Wait()
		r.wall = time.Since(t0)
		close(r.done)
	}()
	d.defer_(func() {
		select {
		case <-r.done:
		default:
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-r.done
		}
	})
	return r, nil
}

// wait waits for the run's end (bounded by nodeTimeout) and returns its
// exit status.
func (r *nodeRun) wait() (int, error) {
	select {
	case <-r.done:
	case <-time.After(nodeTimeout):
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
		return -1, fmt.Errorf("%s did not end within %v:\n%s", strings.Join(r.cmd.Args, " "), nodeTimeout, lastLines(r.out.Bytes(), 20))
	}
	return r.cmd.ProcessState.ExitCode(), nil
}

// passed waits for a started run and returns it if it exited 0.
func passed(r *nodeRun, err error) (*nodeRun, error) {
	if err != nil {
		return nil, err
	}
	status, err := r.wait()
	if err != nil {
		return nil, err
	}
	if status != 0 {
		return nil, fmt.Errorf("exited %d:\n%s", status, lastLines(r.out.Bytes(), 30))
	}
	return r, nil
}

// freePort returns a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// webServerEnv gives the webServer mode what e2e-server needs: a root (it
// creates its tmux sessions through the root's gate) owned by the driver,
// and a free port.
func (d *driver) webServerEnv(xdg string) ([]string, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(d.oj, "root", fmt.Sprintf("webserver-%d", port), "--owner-pid", strconv.Itoa(os.Getpid()))
	cmd.Env = []string{"PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + xdg}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ownerjournal root: %w", err)
	}
	root := strings.TrimSpace(string(out))
	return []string{"OWNERJOURNAL_ROOT=" + root, "OJ_PW_WEBSERVER_PORT=" + strconv.Itoa(port)}, nil
}

// pwXDG makes a private XDG_RUNTIME_DIR for one mode; after the figure,
// everything left in it is recovered and every process that carries it
// as a marker is killed.
func (d *driver) pwXDG() (string, error) {
	xdg, err := d.privateDir()
	if err != nil {
		return "", err
	}
	d.defer_(func() {
		base := filepath.Join(xdg, "ownerjournal")
		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			cmd := exec.Command(d.oj, "recover", "--all", "--grace", "1s", "--root", filepath.Join(base, e.Name()))
			cmd.Env = []string{"PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + xdg}
			cmd.Run()
		}
		killAll(markedProcs("XDG_RUNTIME_DIR=" + xdg))
	})
	return xdg, nil
}

// pwRun runs the suite once in mode m and returns the run.
func (d *driver) pwRun(m pwMode, xdg, sync string) (*nodeRun, error) {
	extra, err := m.env(d, xdg)
	if err != nil {
		return nil, err
	}
	if sync != "" {
		extra = append(extra, "OJ_PW_SYNC="+sync, "OJ_PW_OUTPUT="+filepath.Join(sync, "out"), "OJ_PW_REPORT="+filepath.Join(sync, "report.json"))
	} else {
		out, err := d.privateDir()
		if err != nil {
			return nil, err
		}
		extra = append(extra, "OJ_PW_OUTPUT="+out)
	}
	// Without the reset test in both modes: under webServer both workers
	// share one server, and a reset would end the other worker's sessions.
	return d.startNode(filepath.Join(d.testdata, "playwright"), d.nodeEnv(xdg, extra...),
		"playwright", "test", "--config", m.config, "--grep-invert", "reset ends every session")
}

// pwSideBySide prints pw-left-webserver, pw-left-ownerjournal and
// pw-overhead.
func (d *driver) pwSideBySide() error {
	if err := d.needNode(); err != nil {
		return err
	}
	for _, m := range pwModes {
		left, detail, err := d.pwKilled(m)
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		report("pw-left-"+m.name, strconv.Itoa(left), "%s", detail)
	}
	// Clean runs, the modes alternating so that the machine's load falls on
	// both alike; the median of each.
	const rounds = 5
	walls := map[string][]time.Duration{}
	for range rounds {
		for _, m := range pwModes {
			xdg, err := d.pwXDG()
			if err != nil {
				return err
			}
			r, err := passed(d.pwRun(m, xdg, ""))
			if err != nil {
				return fmt.Errorf("%s: clean run: %w", m.name, err)
			}
			walls[m.name] = append(walls[m.name], r.wall)
		}
	}
	ours, theirs := median(walls["ownerjournal"]), median(walls["webserver"])
	report("pw-overhead", ratio(ours, theirs), "median of %d clean runs of the Playwright suite (6 tests, 2 workers): helper, a server per worker through `ownerjournal run` %v; Playwright's webServer, one server %v; fastest runs' ratio %s; goal <= 1.05",
		rounds, ours.Round(time.Millisecond), theirs.Round(time.Millisecond), ratio(slices.Min(walls["ownerjournal"]), slices.Min(walls["webserver"])))
	return nil
}

// pwKilled runs the suite in mode m until both hold tests hold their
// tmux sessions, SIGKILLs the runner's whole process group (as a CI
// timeout does), runs the suite again to its end, and counts what the
// killed run left alive: the processes it reported (servers, tmux servers,
// supervisors) and any process carrying its marker.
func (d *driver) pwKilled(m pwMode) (int, string, error) {
	xdg, err := d.pwXDG()
	if err != nil {
		return 0, "", err
	}
	sync, err := d.privateDir()
	if err != nil {
		return 0, "", err
	}
	r1, err := d.pwRun(m, xdg, sync)
	if err != nil {
		return 0, "", err
	}
	var ids []owner.Identity
	for i := range 2 {
		b, err := waitFile(filepath.Join(sync, fmt.Sprintf("ready-%d.json", i)), r1.done)
		if err != nil {
			return 0, "", fmt.Errorf("%w:\n%s", err, lastLines(r1.out.Bytes(), 30))
		}
		var ready struct {
			Run      int `json:"runPid"`
			Server   int `json:"serverPid"`
			Sessions []struct {
				PID int `json:"pid"`
			} `json:"sessions"`
		}
		if err := json.Unmarshal(b, &ready); err != nil {
			return 0, "", err
		}
		pids := []int{ready.Run, ready.Server}
		for _, s := range ready.Sessions {
			pids = append(pids, s.PID)
		}
		for _, pid := range pids {
			if pid <= 0 {
				continue // the webServer mode reports no server of its own
			}
			if id, err := owner.Of(pid); err == nil {
				ids = append(ids, id)
			}
		}
	}
	marker := "XDG_RUNTIME_DIR=" + xdg
	ids = appendNew(ids, markedProcs(marker))
	syscall.Kill(-r1.cmd.Process.Pid, syscall.SIGKILL)
	if _, err := r1.wait(); err != nil {
		return 0, "", err
	}
	afterKill := alive(ids)

	if _, err := passed(d.pwRun(m, xdg, "")); err != nil {
		return 0, "", fmt.Errorf("the run after the kill: %w", err)
	}
	// What the next run left running is the killed run's: give processes
	// that are on their way out (SIGTERM sent, grace running) a bounded
	// time to go.
	ids = appendNew(ids, markedProcs(marker))
	left := alive(ids)
	for deadline := time.Now().Add(5 * time.Second); left > 0 && time.Now().Before(deadline); left = alive(ids) {
		time.Sleep(50 * time.Millisecond)
	}
	var names []string
	for _, id := range ids {
		if owner.Check(id).State == owner.Alive {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", id.PID))
			names = append(names, strings.TrimSpace(string(comm)))
		}
	}
	slices.Sort(names)
	return left, fmt.Sprintf("runner's process group SIGKILLed while 2 workers held 2 tmux sessions each: %d of %d processes alive after the kill, %d after the next run %v",
		afterKill, len(ids), left, names), nil
}

// jestOverhead prints jest-overhead: the wall time of a Jest run with the
// helper's globalSetup and globalTeardown over the same run without them.
func (d *driver) jestOverhead() error {
	if err := d.needNode(); err != nil {
		return err
	}
	const rounds = 9
	walls := map[bool][]time.Duration{}
	for range rounds {
		for _, helper := range []bool{false, true} {
			xdg, err := d.pwXDG()
			if err != nil {
				return err
			}
			r, err := passed(d.startNode(filepath.Join(d.testdata, "jest"), d.nodeEnv(xdg, "OJ_BENCH_HELPER="+strconv.FormatBool(helper)),
				"jest", "--config", "jest.bench.config.js"))
			if err != nil {
				return fmt.Errorf("jest (helper %v): %w", helper, err)
			}
			if helper != strings.Contains(r.out.String(), "ownerjournal: recover --all ") {
				return fmt.Errorf("jest (helper %v): the helper's teardown line is %s:\n%s", helper, map[bool]string{true: "missing", false: "there"}[helper], lastLines(r.out.Bytes(), 30))
			}
			walls[helper] = append(walls[helper], r.wall)
		}
	}
	ours, theirs := median(walls[true]), median(walls[false])
	report("jest-overhead", ratio(ours, theirs), "median of %d runs of `jest` on testdata/jest/bench: with ownerjournal/global-setup and global-teardown %v, without %v; fastest runs' ratio %s",
		rounds, ours.Round(time.Millisecond), theirs.Round(time.Millisecond), ratio(slices.Min(walls[true]), slices.Min(walls[false])))
	return nil
}

// nodeFlags sets the Node figures' paths (absolute: the runs start in the
// projects' directories).
func (d *driver) nodeFlags(e2eServer, testdata string) error {
	if e2eServer == "" {
		e2eServer = filepath.Join(filepath.Dir(d.oj), "e2e-server")
	}
	var err error
	if d.e2eServer, err = filepath.Abs(e2eServer); err != nil {
		return err
	}
	d.testdata, err = filepath.Abs(testdata)
	return err
}

// needNode checks the prerequisites of the Node figures.
func (d *driver) needNode() error {
	if fi, err := os.Stat(d.e2eServer); err != nil || fi.IsDir() {
		return fmt.Errorf("e2e-server binary %s not found: build it with `go build -o bin/ ./cmd/...`", d.e2eServer)
	}
	for _, p := range []string{"playwright/node_modules/@playwright/test", "jest/node_modules/jest", "jest/node_modules/ownerjournal"} {
		if _, err := os.Stat(filepath.Join(d.testdata, p)); err != nil {
			return fmt.Errorf("%s is not installed: run `make node-projects`: %w", p, err)
		}
	}
	_, err := exec.LookPath("npx")
	return err
}

// waitFile returns file's contents once it exists, or an error once done
// is closed (the run ended first) or nodeTimeout passed.
func waitFile(file string, done <-chan struct{}) ([]byte, error) {
	deadline := time.Now().Add(nodeTimeout)
	for {
		b, err := os.ReadFile(file)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		select {
		case <-done:
			return nil, fmt.Errorf("the run ended before %s existed", file)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no %s after %v", file, nodeTimeout)
		}
	}
}

// markedProcs returns the identities of the live processes whose initial
// environment holds marker (KEY=VALUE).
func markedProcs(marker string) []owner.Identity {
	var out []owner.Identity
	for _, pid := range procenv.Marked(marker) {
		if id, err := owner.Of(pid); err == nil && owner.Check(id).State == owner.Alive {
			out = append(out, id)
		}
	}
	return out
}

// appendNew appends the identities of more that ids does not hold yet.
func appendNew(ids, more []owner.Identity) []owner.Identity {
	for _, id := range more {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
