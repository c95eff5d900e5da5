package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// TestNodeHelper runs the Node helper's own tests (node --test
// js/ownerjournal/test) against the real CLI in a private root, then checks
// that the root recovers clean: the servers they started are gone.
func TestNodeHelper(t *testing.T) {
	w := newWorld(t)
	root := filepath.Join(testroot.Dir(t), "root")
	require.NoError(t, os.Mkdir(root, 0o700))
	cmd := exec.Command("node", "--test", filepath.Join(repoDir, "js", "ownerjournal", "test", "start-server.test.js"))
	cmd.Env = append(os.Environ(), "OWNERJOURNAL_BIN="+ojBin, "OWNERJOURNAL_ROOT="+root, w.marker())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node --test:\n%s", out)
	assert.Contains(t, string(out), "# pass 2")
	out2, code := w.oj("recover", "--all", "--grace", "1s", "--root", root)
	assert.Equal(t, 0, code, out2)
	assert.NoDirExists(t, root)
	assert.Empty(t, markedProcs(w.marker()), "nothing of the Node tests is left running")
}
