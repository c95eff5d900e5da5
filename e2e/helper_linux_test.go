package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// node runs script with node, the helper's path as process.argv[1], in
// world w's environment plus env; it returns stdout, stderr and the exit
// status.
func (w *world) node(t *testing.T, script string, env ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("node", "-e", script, filepath.Join(repoDir, "js", "ownerjournal"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), w.marker(), "OWNERJOURNAL_BIN=" + ojBin}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return stdout.String(), stderr.String(), code
}

// ownedRoot creates a root in w's base owned by a live process (as a
// runner's would be) and returns its path; it is recovered at cleanup.
func (w *world) ownedRoot(t *testing.T, name string) string {
	t.Helper()
	owner := startSleep(t)
	out, code := w.oj("root", name, "--owner-pid", strconv.Itoa(owner.PID))
	require.Equal(t, 0, code, out)
	root := strings.TrimSpace(out)
	t.Cleanup(func() { w.oj("recover", "--all", "--root", root) })
	return root
}

// TestHelper covers what the Playwright runs do not: the helper used
// directly from Node.
func TestHelper(t *testing.T) {
	t.Run("reuses a root it did not create and keeps it", func(t *testing.T) {
		w := newWorld(t)
		root := w.ownedRoot(t, "outer")
		records := entries(t, filepath.Join(root, "records"))
		require.Len(t, records, 1, "the creator's root-owner record")
		out, stderr, code := w.node(t, `
			const oj = require(process.argv[1]);
			(async () => {
				const root = await oj.setup();
				const r = oj.teardown();
				console.log(JSON.stringify({ root, status: r.status, removed: r.report.root_removed }));
			})().catch((e) => { console.error(e); process.exit(1); });`, "OWNERJOURNAL_ROOT="+root)
		require.Equal(t, 0, code, "%s%s", out, stderr)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.NotEmpty(t, lines)
		var got struct {
			Root    string
			Status  int
			Removed bool
		}
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &got), out)
		assert.Equal(t, root, got.Root)
		assert.Equal(t, 0, got.Status)
		assert.False(t, got.Removed)
		assert.DirExists(t, root, "a reused root is kept (--keep-root) for its creator")
		assert.Contains(t, out, "ownerjournal: recover --keep-root "+root+" (globalTeardown): exit 0;")
		assert.ElementsMatch(t, records, entries(t, filepath.Join(root, "records")), "the creator's records are untouched")
	})

	t.Run("a missing ownerjournal binary fails loudly", func(t *testing.T) {
		w := newWorld(t)
		out, stderr, code := w.node(t, `
			require(process.argv[1]).setup().then(
				() => { console.log('no error'); },
				(e) => { console.log(e.message); process.exit(1); });`, "OWNERJOURNAL_BIN=/nonexistent/ownerjournal")
		assert.Equal(t, 1, code, "%s%s", out, stderr)
		assert.Contains(t, out, "cannot run /nonexistent/ownerjournal")
		assert.Contains(t, out, "install ownerjournal or set OWNERJOURNAL_BIN")
		w.checkNothingLeft(nil)
	})

	t.Run("teardown runs recovery again when a Ctrl-C killed it early", func(t *testing.T) {
		w := newWorld(t)
		// The first `recover` dies of SIGINT before it does anything, as
		// one hit by a Ctrl-C before it caught signals would.
		dir := testroot.PrivateDir(t, "ojw")
		wrapper := filepath.Join(dir, "ownerjournal")
		require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\n"+
			"if [ \"$1\" = recover ] && mkdir \""+dir+"/killed\" 2>/dev/null; then kill -INT $$; fi\n"+
			"exec "+ojBin+" \"$@\"\n"), 0o700))
		out, stderr, code := w.node(t, `
			const oj = require(process.argv[1]);
			(async () => { await oj.setup(); oj.teardown(); })().catch((e) => { console.error(e); process.exit(1); });`,
			"OWNERJOURNAL_BIN="+wrapper)
		require.Equal(t, 0, code, "%s%s", out, stderr)
		assert.DirExists(t, filepath.Join(dir, "killed"), "the first attempt was killed")
		assert.Regexp(t, `ownerjournal: recover --all \S+ \(globalTeardown\): exit 0; .*root removed; 1 earlier attempt\(s\) killed by SIGINT before they caught signals; \d+ ms`, out)
		w.checkNothingLeft(nil)
	})

	t.Run("a teardown run again after the root is gone passes --missing-ok", func(t *testing.T) {
		w := newWorld(t)
		// The first `recover` removes the root, then dies of SIGINT
		// before it printed its report: the retry finds no root.
		dir := testroot.PrivateDir(t, "ojw")
		wrapper := filepath.Join(dir, "ownerjournal")
		require.NoError(t, os.WriteFile(wrapper, []byte("#!/bin/sh\n"+
			"if [ \"$1\" = recover ] && mkdir \""+dir+"/killed\" 2>/dev/null; then "+ojBin+" \"$@\" >/dev/null; kill -INT $$; fi\n"+
			"exec "+ojBin+" \"$@\"\n"), 0o700))
		out, stderr, code := w.node(t, `
			const oj = require(process.argv[1]);
			(async () => { await oj.setup(); oj.teardown(); })().catch((e) => { console.error(e); process.exit(1); });`,
			"OWNERJOURNAL_BIN="+wrapper)
		require.Equal(t, 0, code, "%s%s", out, stderr)
		assert.DirExists(t, filepath.Join(dir, "killed"), "the first attempt ran and was killed")
		assert.Regexp(t, `ownerjournal: recover --all \S+ \(globalTeardown\): exit 0; .*no root \(already gone\); 1 earlier attempt\(s\) killed by SIGINT`, out)
		w.checkNothingLeft(nil)
	})

	t.Run("a server that exits before it is ready leaves nothing", func(t *testing.T) {
		w := newWorld(t)
		root := w.ownedRoot(t, "run")
		before := entries(t, filepath.Join(root, "records"))
		out, stderr, code := w.node(t, `
			require(process.argv[1]).startServer('/bin/false', [], { label: 'never ready' }).then(
				() => { console.log('ready?'); },
				(e) => { console.log(e.message); process.exit(1); });`, "OWNERJOURNAL_ROOT="+root)
		assert.Equal(t, 1, code, "%s%s", out, stderr)
		assert.Contains(t, out, "before it wrote")
		assert.ElementsMatch(t, []string{"leases", "lock", "records"}, entries(t, root), "the ready directory is gone")
		assert.ElementsMatch(t, before, entries(t, filepath.Join(root, "records")), "its record is retired")
		assert.Empty(t, markedProcs(w.marker()))
	})
}
