package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"github.com/ownerjournal/ownerjournal/owner"
)

// startParent is run's parent PID as the process first saw it: read while
// the package is initialised, the earliest point Go code runs. The runtime's
// own start-up (about a millisecond, with threads of its own) comes before
// it; a spawner that dies inside that window is caught by
// $OWNERJOURNAL_SPAWNER or by the session check of watchSpawner.
var startParent = os.Getppid()

// exitSpawnerGone is run's exit status when the process that spawned it is
// gone: CMD was never started, or its tree was ended (see run's help).
const exitSpawnerGone = 4

// errSpawnerGone is wrapped by the errors that say run's spawner exited.
var errSpawnerGone = errors.New("the spawner is gone")

// spawner watches the process that started run (run's parent, captured by
// identity at start). Its gone channel is closed, and why set, when that
// process has exited. The zero PID means there is nothing to watch (run has
// no parent in its PID namespace).
type spawner struct {
	id   owner.Identity
	gone chan struct{}
	once sync.Once
	mu   sync.Mutex
	why  string
	log  io.Writer
	plat spawnerPlatform
}

// markGone records why the spawner is gone and closes gone, once.
func (sp *spawner) markGone(why string) {
	sp.once.Do(func() {
		sp.mu.Lock()
		sp.why = why
		sp.mu.Unlock()
		close(sp.gone)
	})
}

// err returns an error wrapping errSpawnerGone when the spawner is gone.
func (sp *spawner) err() error {
	select {
	case <-sp.gone:
		sp.mu.Lock()
		defer sp.mu.Unlock()
		return fmt.Errorf("%w: %s", errSpawnerGone, sp.why)
	default:
		return nil
	}
}

// claimedSpawner reads $OWNERJOURNAL_SPAWNER: 0 when unset.
func claimedSpawner() (int, error) {
	v := os.Getenv(envSpawner)
	if v == "" {
		return 0, nil
	}
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		return 0, usagef("%s=%q is not a PID", envSpawner, v)
	}
	return pid, nil
}
