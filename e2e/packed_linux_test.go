package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/procenv"
)

// packedCmd runs argv in the Jest project (installed from the packed
// tarballs) in world w, with no go and no ownerjournal on PATH and no
// OWNERJOURNAL_BIN, plus env; it returns stdout, stderr and the status.
func (w *world) packedCmd(t *testing.T, env []string, argv ...string) (string, string, int) {
	t.Helper()
	path := pathWithout("go", "ownerjournal")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = jest.dir()
	cmd.Env = append(append(procenv.Scrubbed(os.Environ()), npmQuiet...), append([]string{"PATH=" + path, w.marker()}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee)
	}
	return stdout.String(), stderr.String(), exitStatus(cmd.ProcessState)
}

// nodeArch is Node's name for this machine's architecture.
func nodeArch() string {
	if runtime.GOARCH == "amd64" {
		return "x64"
	}
	return runtime.GOARCH
}

// TestPacked covers what the installed npm packages promise beyond the
// runners' scenarios: the `ownerjournal` bin, and where the helper looks
// for the binary.
func TestPacked(t *testing.T) {
	own := "@ownerjournal/linux-" + nodeArch()

	t.Run("the bin runs the platform package's binary and passes its exit status on", func(t *testing.T) {
		w := newWorld(t)
		out, stderr, code := w.packedCmd(t, nil, "npx", "--no", "--", "ownerjournal", "root", "bin-test")
		require.Equal(t, 0, code, "%s%s", out, stderr)
		root := strings.TrimSpace(out)
		assert.Equal(t, filepath.Join(w.base, "bin-test"), root)
		out, stderr, code = w.packedCmd(t, nil, "npx", "--no", "--", "ownerjournal", "recover", "--all", "--root", root)
		require.Equal(t, 0, code, "%s%s", out, stderr)
		assert.NoDirExists(t, root)
		_, stderr, code = w.packedCmd(t, nil, "npx", "--no", "--", "ownerjournal", "no-such-command")
		assert.Equal(t, 2, code, "a usage error's status comes through: %s", stderr)
		w.checkNothingLeft(nil)
	})

	t.Run("the bin dies by the signal that killed the binary", func(t *testing.T) {
		w := newWorld(t)
		// The command SIGKILLs its supervisor, `ownerjournal run`: the bin
		// must end the same way, not with a made-up exit status.
		_, stderr, code := w.packedCmd(t, []string{"OWNERJOURNAL_ROOT=" + w.ownedRoot(t, "sig")},
			"node", "node_modules/ownerjournal/bin/ownerjournal.js", "run", "--", "sh", "-c", "exec kill -KILL $PPID")
		assert.Equal(t, 128+int(unix.SIGKILL), code, stderr)
		w.checkNothingLeft([]string{"sig"})
	})

	t.Run("the platform package comes before OWNERJOURNAL_BIN and PATH", func(t *testing.T) {
		w := newWorld(t)
		out, stderr, code := w.packedCmd(t, []string{"OWNERJOURNAL_BIN=/nonexistent/ownerjournal"},
			"node", "-e", `const b = require('ownerjournal/platform.js').findBinary(); console.log(b.source + ' ' + b.path)`)
		require.Equal(t, 0, code, stderr)
		assert.Equal(t, own+" "+filepath.Join(jest.dir(), "node_modules", own, "bin", "ownerjournal"), strings.TrimSpace(out))
	})

	t.Run("a missing platform package is named", func(t *testing.T) {
		w := newWorld(t)
		// linux-arm64 is never installed on x64 (and the other way round):
		// npm skipped it by its cpu field.
		other := map[string]string{"x64": "arm64", "arm64": "x64"}[nodeArch()]
		require.NotEmpty(t, other)
		out, stderr, code := w.packedCmd(t, nil, "node", "-e", `
			const { findBinary } = require('ownerjournal/platform.js');
			for (const platform of ['linux-`+other+`', 'win32-x64']) {
				try { findBinary({ platform }); console.log('found?'); } catch (e) { console.log(e.message); }
			}`)
		require.Equal(t, 0, code, stderr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Len(t, lines, 2, out)
		assert.Contains(t, lines[0], "the platform package @ownerjournal/linux-"+other+" is not installed")
		assert.Contains(t, lines[0], "OWNERJOURNAL_BIN is not set; and no ownerjournal is on PATH")
		assert.Contains(t, lines[1], "there is no ownerjournal platform package for win32-x64")
	})
}
