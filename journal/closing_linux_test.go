package journal

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/owner"
)

// TestClosingMarkerNamesRecoverer: MarkClosing records who marked the root;
// ReopenIfAbandoned refuses while that recoverer lives and reopens once it
// is verified dead.
func TestClosingMarkerNamesRecoverer(t *testing.T) {
	dir := filepath.Join(testroot.Dir(t), "r")
	require.NoError(t, os.Mkdir(dir, 0o700))
	r, err := Open(dir)
	require.NoError(t, err)
	defer r.Close()
	info, err := r.ClosingInfo()
	require.NoError(t, err)
	assert.Nil(t, info, "an open root has no closing marker")

	require.NoError(t, r.MarkClosing())
	self, err := owner.Self()
	require.NoError(t, err)
	info, err = r.ClosingInfo()
	require.NoError(t, err)
	require.NotNil(t, info)
	require.NotNil(t, info.By)
	assert.Equal(t, self, *info.By)
	assert.False(t, info.Since.IsZero())

	err = r.ReopenIfAbandoned()
	require.ErrorIs(t, err, ErrClosing)
	assert.Equal(t, fmt.Sprintf("journal: %s is closing: the recoverer that marked it (pid %d) is alive; let it finish", dir, self.PID), err.Error())
	closing, err := r.Closing()
	require.NoError(t, err)
	assert.True(t, closing, "refused: still closing")

	// A marker written by a recoverer that has died.
	cmd := exec.Command("sleep", "1000")
	require.NoError(t, cmd.Start())
	dead, err := owner.Of(cmd.Process.Pid)
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Kill())
	cmd.Wait()
	b, err := json.Marshal(dead)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, closingName), b, 0o600))

	require.NoError(t, r.ReopenIfAbandoned())
	closing, err = r.Closing()
	require.NoError(t, err)
	assert.False(t, closing)
	adm, err := r.Admit(t.Context())
	require.NoError(t, err, "admitted again")
	adm.Done()
}
