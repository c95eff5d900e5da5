// Package procenv holds what the end-to-end tests (e2e/) and the bench
// driver (bench/cmd/benchdriver) both do with process environments when
// they drive a Node test runner: give the run an environment without the
// variables that would steer it elsewhere, and find every process of a run
// by a marker variable that all of them inherit.
//
// A marker finds only processes that kept the environment they inherited
// (a tmux server started with a scrubbed environment does not); callers
// track those by identity. The package reads /proc and works on Linux only;
// elsewhere Marked finds nothing.
package procenv

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Steering reports whether the environment variable key would steer a
// driven run away from what its driver sets up: another root or binary, the
// caller's runtime directory or tmux, CI mode, or the drivers' own OJ_,
// PLAYWRIGHT_ and PW_ settings.
func Steering(key string) bool {
	switch key {
	case "OWNERJOURNAL_ROOT", "OWNERJOURNAL_BIN", "XDG_RUNTIME_DIR", "TMUX", "TMUX_PANE", "CI":
		return true
	}
	return strings.HasPrefix(key, "OJ_") || strings.HasPrefix(key, "PLAYWRIGHT_") || strings.HasPrefix(key, "PW_")
}

// Scrubbed returns environ without the variables Steering names.
func Scrubbed(environ []string) []string {
	var env []string
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); !Steering(k) {
			env = append(env, kv)
		}
	}
	return env
}

// Marked returns the PIDs, other than this process's, whose initial
// environment (/proc/PID/environ) holds marker, a whole KEY=VALUE entry.
// Processes it cannot read are not listed; zombies are (the caller checks
// liveness by identity).
func Marked(marker string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00"+marker+"\x00")) {
			continue
		}
		out = append(out, pid)
	}
	return out
}
