//go:build !linux

package main

import (
	"fmt"
	"io"
	"os"
)

// spawnerPlatform: there is no pidfd here.
type spawnerPlatform struct{}

// watchSpawner compares the parent with the PID read at start and with
// $OWNERJOURNAL_SPAWNER. Without a pidfd there is no watch during run's
// life: the spawner's death is noticed only before CMD starts (check).
func watchSpawner(log io.Writer) (*spawner, error) {
	sp := &spawner{gone: make(chan struct{}), log: log}
	claimed, err := claimedSpawner()
	if err != nil {
		return nil, err
	}
	os.Unsetenv(envSpawner)
	ppid := os.Getppid()
	switch {
	case ppid != startParent:
		sp.markGone(fmt.Sprintf("run's parent, pid %d, exited before run could watch it", startParent))
	case claimed != 0 && claimed != ppid:
		sp.markGone(fmt.Sprintf("%s names pid %d, but run's parent is pid %d: the spawner exited before run started and run was adopted", envSpawner, claimed, ppid))
	}
	if err := sp.err(); err != nil {
		return nil, err
	}
	return sp, nil
}

func (sp *spawner) check() error {
	if os.Getppid() != startParent {
		sp.markGone(fmt.Sprintf("run's parent, pid %d, exited", startParent))
	}
	return sp.err()
}

func (sp *spawner) close() {}
