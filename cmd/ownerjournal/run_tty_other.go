//go:build !linux

package main

import (
	"os"
	"syscall"
)

// terminal: job control for CMD is implemented on Linux only; elsewhere
// nothing about terminals changes (CMD runs in its own, background, group).
type terminal struct{}

func openTerminal() *terminal                       { return nil }
func (t *terminal) foreground(*syscall.SysProcAttr) {}
func (t *terminal) notify() <-chan os.Signal        { return nil }
func (t *terminal) release(int, bool)               {}
func (s *supervisor) onJobSignal(os.Signal)         {}
