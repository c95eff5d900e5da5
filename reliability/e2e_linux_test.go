package reliability

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The e2e-server's own crash hooks (OJ_E2E_CRASH_AT=STAGE, a marker file in
// OJ_E2E_MARKER_DIR, then blocking until SIGKILL) join the crash matrix. The
// stages are asked of the built binary itself (it lists them when given an
// unknown one), so a stage added there is exercised here, or fails here for
// want of a trigger.

// e2eStages returns the e2e-server's crash stages, prefixed "e2e:".
func e2eStages(t *testing.T, e *env) []string {
	t.Helper()
	if e.e2e == "" {
		t.Log("cmd/e2e-server does not exist: no e2e-server stages")
		return nil
	}
	d, _ := runDir(t)
	cmd := exec.Command(e.e2e, "--root", filepath.Join(d, "r"))
	cmd.Env = append(os.Environ(), "OJ_E2E_CRASH_AT=no-such-stage", "OJ_E2E_MARKER_DIR="+d)
	out, _, err := e.run(cmd)
	require.NoError(t, err)
	m := regexp.MustCompile(`\(stages: ([^)]*)\)`).FindStringSubmatch(out)
	require.NotNil(t, m, "e2e-server did not list its stages:\n%s", out)
	var stages []string
	for _, s := range strings.Split(m[1], ", ") {
		stages = append(stages, "e2e:"+strings.TrimSpace(s))
	}
	return stages
}

// e2eTrigger is what makes the server reach a stage.
func e2eTrigger(stage string, i int) (string, bool) {
	switch stage {
	case "gate-closed": // reached by both
		return map[bool]string{true: "shutdown", false: "reset"}[i%2 == 0], true
	case "before-intent", "after-intent", "after-daemonized", "in-handler":
		return "create", true
	case "scratch":
		return "scratch", true
	case "shutdown-before-kill", "shutdown-after-kill":
		return "shutdown", true
	case "reset-before-kill", "reset-after-kill":
		return "reset", true
	}
	return "", false
}

func crashE2E(t *testing.T, e *env, rs *runState) {
	tag, dir, root := rs.tag, rs.dir, rs.root
	name := strings.TrimPrefix(rs.stage, "e2e:")
	trigger, ok := e2eTrigger(name, rs.i)
	require.True(t, ok, "no trigger known for e2e-server stage %q", name)
	m := filepath.Join(dir, "m")
	require.NoError(t, os.Mkdir(m, 0o700))
	readyFile := filepath.Join(m, "ready.json")
	cmd := exec.Command(e.e2e, "--root", root, "--ready-file", readyFile, "--tmux", e.tmux,
		"--grace", "1s", "--drain-timeout", "2s", "--creator-wait", "2s")
	cmd.Env = append(withoutTMUX(os.Environ()), tagEnv(tag, "OJ_E2E_CRASH_AT="+name, "OJ_E2E_MARKER_DIR="+m)...)
	srv := e.spawn(t, cmd)
	var rd struct {
		Addr string `json:"addr"`
	}
	waitUntil(t, []string{m}, srv, func() bool {
		b, err := os.ReadFile(readyFile)
		return err == nil && json.Unmarshal(b, &rd) == nil
	}, "e2e-server ready")
	base := "http://" + rd.Addr
	client := &http.Client{Timeout: 30 * time.Second}
	do := func(method, path, body string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Less(t, resp.StatusCode, 300, "%s %s", method, path)
	}
	// The request that reaches the stage blocks with the server: send it in
	// the background; the SIGKILL ends it.
	async := func(method, path, body string) {
		go func() {
			req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	switch trigger {
	case "create":
		async("POST", "/sessions", "{}")
	case "scratch":
		do("POST", "/sessions", "{}")
		async("PUT", "/scratch/x", "scratch data")
	case "shutdown":
		do("POST", "/sessions", "{}")
		do("POST", "/sessions", "{}")
		require.NoError(t, srv.signal(syscall.SIGTERM))
	case "reset":
		do("POST", "/sessions", "{}")
		async("POST", "/reset", "")
	}
	waitUntil(t, []string{m}, srv, func() bool {
		_, err := os.Stat(filepath.Join(m, name))
		return err == nil
	}, "e2e-server stage "+name)
	srv.kill()
}
