package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/owner"
)

// envReps sets how many times each cell of the crash matrix runs (default
// 3; a soak runs 50).
const envReps = "OJ_E2E_REPS"

func repetitions(t *testing.T) int {
	t.Helper()
	v := os.Getenv(envReps)
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s=%q", envReps, v)
	require.Positive(t, n, "%s", envReps)
	return n
}

// crashStage is one marked point of the matrix and how to drive the server
// to it. Stages inside POST /sessions fire at the second creation, so that a
// live session exists besides the one being created.
type crashStage struct {
	stage   string
	crashAt string
	drive   func(s *srv)
	// tmuxLive says whether the first session's tmux server still runs
	// when the server dies (before shutdown or reset ended it).
	tmuxLive bool
}

var crashStages = []crashStage{
	{stageBeforeIntent, stageBeforeIntent + "@2", createAsync, true},
	{stageAfterIntent, stageAfterIntent + "@2", createAsync, true},
	{stageAfterDaemonized, stageAfterDaemonized + "@2", createAsync, true},
	{stageInHandler, stageInHandler + "@2", createAsync, true},
	{stageScratch, stageScratch, func(s *srv) { s.async("PUT", "/scratch/note", []byte("data")) }, true},
	{stageGateClosed, stageGateClosed, func(s *srv) { s.signal(syscall.SIGTERM) }, true},
	{stageShutdownBeforeKill, stageShutdownBeforeKill, func(s *srv) { s.signal(syscall.SIGTERM) }, true},
	{stageShutdownAfterKill, stageShutdownAfterKill, func(s *srv) { s.signal(syscall.SIGTERM) }, false},
	{stageResetBeforeKill, stageResetBeforeKill, func(s *srv) { s.async("POST", "/reset", nil) }, true},
	{stageResetAfterKill, stageResetAfterKill, func(s *srv) { s.async("POST", "/reset", nil) }, false},
}

func createAsync(s *srv) { s.async("POST", "/sessions", nil) }

// crashMode is what is SIGKILLed.
type crashMode string

const (
	modeDirect   crashMode = "server"           // the server, started directly
	modeUnderRun crashMode = "server-under-run" // the server, under `ownerjournal run`
	modeBoth     crashMode = "run-and-server"   // both `ownerjournal run` and the server
)

// TestCrashMatrix SIGKILLs the server at every marked stage, directly, under
// `ownerjournal run`, and together with `run`; each cell runs
// $OJ_E2E_REPS times (default 3). After each crash the root is recovered —
// by the library, orphans only or --all, or by the CLI `recover --all`, in
// turn — and must leave no tmux server, no pane, no socket, no directory,
// while a tmux server on another private socket and an unrelated process
// survive.
func TestCrashMatrix(t *testing.T) {
	requireTmux(t)
	cliBinary(t) // build it before the parallel cells
	by := startBystanders(t)
	n := repetitions(t)
	for _, mode := range []crashMode{modeDirect, modeUnderRun, modeBoth} {
		for _, st := range crashStages {
			t.Run(fmt.Sprintf("%s/%s", mode, st.stage), func(t *testing.T) {
				t.Parallel()
				for i := 0; i < n; i++ {
					how := []recoverHow{libOrphans, libAll, cliAll}[i%3]
					t.Run(fmt.Sprintf("rep%d", i), func(t *testing.T) {
						crashOnce(t, mode, st, how)
						by.check(t)
					})
				}
			})
		}
	}
}

func crashOnce(t *testing.T, mode crashMode, st crashStage, how recoverHow) {
	root := newRoot(t)
	s := startServer(t, root, srvOpts{crashAt: st.crashAt, viaRun: mode != modeDirect})
	first := s.create()
	st.drive(s)
	s.marker(st.stage)
	switch mode {
	case modeDirect:
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
		require.Equal(t, -1, s.exitCode(), "killed by SIGKILL")
	case modeUnderRun:
		s.signal(syscall.SIGKILL)
		// run ends the tree and exits with the command's status.
		require.Equal(t, 128+int(syscall.SIGKILL), s.exitCode(), "%s", s.stderr.String())
	case modeBoth:
		require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
		if err := s.proc.Signal(syscall.SIGKILL); err != nil {
			require.True(t, errors.Is(err, owner.ErrGone), "%v", err)
		}
		require.Equal(t, -1, s.exitCode())
	}
	s.awaitServerExit()
	if mode == modeDirect {
		// Something was left to recover: the crash did not clean up.
		assert.Equal(t, st.tmuxLive, tmuxAnswers(t, first.Socket), "first session's tmux server before recovery")
	}
	recoverRoot(t, root, how)
	requireNothingLeft(t, root)
}
