//go:build !linux && !darwin

package owner

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

func bootID() (string, error) { return "", fmt.Errorf("owner: boot id: %w", errors.ErrUnsupported) }

func readProc(pid int) (procInfo, error) {
	return procInfo{}, fmt.Errorf("owner: read pid %d: %w", pid, errors.ErrUnsupported)
}

type handle struct{}

func openHandle(Identity) (handle, error) {
	return handle{}, fmt.Errorf("owner: open: %w", errors.ErrUnsupported)
}

func (handle) signal(Identity, syscall.Signal, bool) error {
	return fmt.Errorf("owner: signal: %w", errors.ErrUnsupported)
}
func (handle) exited() bool { return false }
func (handle) wait(context.Context) error {
	return fmt.Errorf("owner: wait: %w", errors.ErrUnsupported)
}
func (handle) close() error { return nil }

func groupAlive(int) (bool, error) {
	return false, fmt.Errorf("owner: group: %w", errors.ErrUnsupported)
}

// getpgrp has no meaning where nothing can be signalled.
func getpgrp() int { return -1 }
