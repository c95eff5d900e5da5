package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/renameio/v2"
)

// Stages the crash and pause hooks can name. Each marks a point where a
// SIGKILL must not leak anything.
const (
	// In POST /sessions, inside the admission, before the intent record.
	stageBeforeIntent = "before-intent"
	// After the intent record, before `tmux new-session`.
	stageAfterIntent = "after-intent"
	// After tmux has daemonized (new-session returned), before the live record.
	stageAfterDaemonized = "after-daemonized"
	// After the live record, before the answer is written.
	stageInHandler = "in-handler"
	// In PUT /scratch/{name}, after the body was read, before it is written
	// into the state's scratch directory.
	stageScratch = "scratch"
	// In shutdown and reset, right after the creation gate closed, before
	// admitted creators are awaited.
	stageGateClosed = "gate-closed"
	// In shutdown, after admitted creators were awaited, before tmux is ended.
	stageShutdownBeforeKill = "shutdown-before-kill"
	// In shutdown, after tmux was ended, before handlers are drained and the
	// state is destroyed.
	stageShutdownAfterKill = "shutdown-after-kill"
	// In reset, after admitted creators were awaited, before tmux is ended.
	stageResetBeforeKill = "reset-before-kill"
	// In reset, after tmux was ended, before the old state is destroyed and
	// the new one made.
	stageResetAfterKill = "reset-after-kill"
)

var allStages = []string{
	stageBeforeIntent, stageAfterIntent, stageAfterDaemonized, stageInHandler, stageScratch, stageGateClosed,
	stageShutdownBeforeKill, stageShutdownAfterKill, stageResetBeforeKill, stageResetAfterKill,
}

// Environment of the test hooks.
const (
	envCrashAt   = "OJ_E2E_CRASH_AT"
	envPauseAt   = "OJ_E2E_PAUSE_AT"
	envMarkerDir = "OJ_E2E_MARKER_DIR"
)

// hook is one armed stage: it fires at the nth time the stage is reached.
type hook struct {
	crash   bool
	nth     int
	hits    int
	release chan struct{}
	once    sync.Once
}

// stages holds the armed hooks. The zero value (nil map) fires nothing.
type stages struct {
	dir   string
	mu    sync.Mutex
	hooks map[string]*hook
}

// stagesFromEnv arms the hooks named by OJ_E2E_CRASH_AT and OJ_E2E_PAUSE_AT.
// Pauses are released by lines read from stdin.
func stagesFromEnv(stdin io.Reader) (*stages, error) {
	st := &stages{dir: os.Getenv(envMarkerDir), hooks: map[string]*hook{}}
	arm := func(spec string, crash bool) error {
		for _, item := range strings.Split(spec, ",") {
			if item == "" {
				continue
			}
			name, n, err := parseStage(item)
			if err != nil {
				return err
			}
			st.hooks[name] = &hook{crash: crash, nth: n, release: make(chan struct{})}
		}
		return nil
	}
	if err := arm(os.Getenv(envCrashAt), true); err != nil {
		return nil, err
	}
	if err := arm(os.Getenv(envPauseAt), false); err != nil {
		return nil, err
	}
	if len(st.hooks) == 0 {
		return st, nil
	}
	if st.dir == "" {
		return nil, fmt.Errorf("%s or %s is set but %s is not", envCrashAt, envPauseAt, envMarkerDir)
	}
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			st.mu.Lock()
			h := st.hooks[strings.TrimSpace(sc.Text())]
			st.mu.Unlock()
			if h != nil && !h.crash {
				h.once.Do(func() { close(h.release) })
			}
		}
	}()
	return st, nil
}

func parseStage(item string) (string, int, error) {
	name, count, hasCount := strings.Cut(item, "@")
	n := 1
	if hasCount {
		var err error
		if n, err = strconv.Atoi(count); err != nil || n < 1 {
			return "", 0, fmt.Errorf("stage %q: bad count", item)
		}
	}
	for _, s := range allStages {
		if s == name {
			return name, n, nil
		}
	}
	return "", 0, fmt.Errorf("unknown stage %q (stages: %s)", name, strings.Join(allStages, ", "))
}

// at is called when the server reaches stage name. An armed crash hook
// writes the marker and blocks forever (the test SIGKILLs the server); an
// armed pause hook writes the marker and waits for its release.
func (st *stages) at(name string) {
	st.mu.Lock()
	h := st.hooks[name]
	fire := false
	if h != nil {
		h.hits++
		fire = h.hits == h.nth
	}
	st.mu.Unlock()
	if !fire {
		return
	}
	if err := renameio.WriteFile(filepath.Join(st.dir, name), []byte(name+"\n"), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "e2e-server: marker %s: %v\n", name, err)
	}
	if h.crash {
		// Block until SIGKILL. A timer, unlike an empty select, keeps
		// the runtime's deadlock detector quiet.
		for {
			time.Sleep(time.Hour)
		}
	}
	<-h.release
}
