package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/journal"
)

// hostileText clears the screen and forges a summary line of its own.
const hostileText = "x\x1b[2J\x1b]0;pwned\x07\nrecover (all) FORGED: 0 orphan; 0 retained; root removed\r"

// requireSafeOutput fails if out holds a control byte other than the
// newlines that end lines (and the tabs of nothing: tabwriter pads with
// spaces), or a forged summary line.
func requireSafeOutput(t *testing.T, what, out string, summaries int) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		if c := out[i]; (c < 0x20 && c != '\n') || c == 0x7f {
			t.Errorf("%s: raw control byte %#02x at %d:\n%q", what, c, i, out)
			return
		}
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "recover (") {
			n++
		}
	}
	assert.Equal(t, summaries, n, "%s: lines that begin like a summary:\n%s", what, out)
	assert.NotContains(t, out, "FORGED: 0 orphan; 0 retained; root removed\n", what)
}

// TestOutputIsSafe: hostile text in a root (a record's label with escape
// sequences and a newline that forges "recover (all) ...: root removed", a
// records/ entry and an unrecorded entry with such names) reaches neither
// the terminal nor the log raw from status, recover or their logs; --json
// stays exact JSON that carries the text unchanged.
func TestOutputIsSafe(t *testing.T) {
	t.Parallel()
	root := newRoot(t)
	dir := workDir(t)
	rec := &journal.Record{Kind: journal.KindPath, Label: "plain", Owner: deadOwner(t, dir), Paths: []string{"scratch"}}
	plantRaw(t, root, rec, func(b []byte) []byte {
		lb, _ := json.Marshal(hostileText)
		return bytes.Replace(b, []byte(`"plain"`), lb, 1)
	})
	require.NoError(t, os.WriteFile(filepath.Join(root, "records", hostileText+".json"), []byte("{}"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, hostileText), nil, 0o600))

	// A hostile label is refused at publish, and the refusal is safe too.
	victim := sleeper(t, dir, "victim")
	stdout, stderr, code := oj(t, "publish", "--root", root, "--pid", fmt.Sprint(victim.PID), "--label", hostileText)
	assert.Equal(t, 1, code, "publish of a label with control characters: %s", stderr)
	requireSafeOutput(t, "publish", stdout+stderr, 0)
	assert.Contains(t, stderr, "control character")

	stdout, stderr, code = oj(t, "status", "--root", root)
	assert.Equal(t, 3, code)
	requireSafeOutput(t, "status", stdout+stderr, 0)
	assert.Contains(t, stdout, `unrecorded entry: "x\x1b[2J`)

	stdout, stderr, code = oj(t, "status", "--json", "--root", root)
	assert.Equal(t, 3, code)
	requireSafeOutput(t, "status --json", stdout+stderr, 0)
	var doc struct {
		Records []struct {
			Path   string `json:"path"`
			Reason string `json:"reason"`
		} `json:"records"`
		Extra []string `json:"unrecorded"`
	}
	require.NoError(t, oneJSON([]byte(stdout), &doc))
	var paths, reasons []string
	for _, r := range doc.Records {
		paths = append(paths, r.Path)
		reasons = append(reasons, r.Reason)
	}
	assert.Contains(t, paths, filepath.Join(root, "records", hostileText+".json"), "the JSON carries the name exactly")
	assert.Contains(t, strings.Join(reasons, "\n"), "control character U+001B")
	assert.Contains(t, stdout, hostileTextJSON(t), "the JSON carries the text exactly")

	stdout, stderr, code = oj(t, "recover", "--all", "--grace", "300ms", "--root", root)
	assert.Equal(t, 3, code)
	requireSafeOutput(t, "recover", stdout+stderr, 1)

	rep, stderr, code := recoverReport(t, "--all", "--grace", "300ms", "--root", root)
	assert.Equal(t, 3, code)
	requireSafeOutput(t, "recover --json stderr", stderr, 0)
	var found bool
	for _, a := range rep.Actions {
		found = found || a.Path == filepath.Join(root, "records", hostileText+".json")
	}
	assert.True(t, found, "the report names the hostile entry exactly")
}

// hostileTextJSON is hostileText as encoding/json writes it.
func hostileTextJSON(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(hostileText)
	require.NoError(t, err)
	return strings.Trim(string(b), `"`)
}
