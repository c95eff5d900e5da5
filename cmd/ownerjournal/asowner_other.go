//go:build !linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// asOwner: re-executing as the root's owner is implemented on Linux only
// (its capability check is Linux's). A root the caller owns needs nothing.
func (c *cli) asOwner(root string, _ []string) (bool, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return true, err
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		return false, nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return true, fmt.Errorf("--as-owner: %s is owned by uid %d; recovering as another user is supported on Linux only", abs, st.Uid)
	}
	return false, nil
}
