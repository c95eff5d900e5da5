package procenv

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestScrubbed(t *testing.T) {
	in := []string{"PATH=/usr/bin", "OWNERJOURNAL_ROOT=/r", "OWNERJOURNAL_BIN=/b", "XDG_RUNTIME_DIR=/x", "TMUX=/t,1,0",
		"TMUX_PANE=%1", "CI=true", "OJ_PW_SYNC=/s", "PLAYWRIGHT_BROWSERS_PATH=/p", "PW_TEST_X=1", "HOME=/root", "OWNERJOURNAL_ROOTX=kept"}
	assert.Equal(t, []string{"PATH=/usr/bin", "HOME=/root", "OWNERJOURNAL_ROOTX=kept"}, Scrubbed(in))
}

// TestMarked: a child started with the marker is found; one without it,
// and a marker that is only a prefix of an entry, are not.
func TestMarked(t *testing.T) {
	marker := "OJ_PROCENV_TEST=" + t.Name()
	start := func(env ...string) int {
		cmd := exec.Command("sleep", "60")
		cmd.Env = env
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd.Process.Pid
	}
	with := start("PATH=/usr/bin:/bin", marker)
	without := start("PATH=/usr/bin:/bin", marker+"-other")
	got := Marked(marker)
	assert.Contains(t, got, with)
	assert.NotContains(t, got, without)
	assert.False(t, slices.Contains(got, os.Getpid()), "never this process")
}
