package reliability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// identityHostile are the hostile inputs of issue 12: records that cannot
// prove an identity, names that are not text, text that would act on a
// terminal, a group that holds the recoverer's runner and sockets that never
// answer. Each fails on a build that believes them.
var identityHostile = []struct {
	name string
	fn   func(h *hostile) bool
}{
	{"live owner's identity with start time 0", func(h *hostile) bool {
		return h.forged("owner identity: start_time is missing", func(o, s *owner.Identity) { *o = h.baitID; o.StartTime = 0 })
	}},
	{"live owner's identity without boot id", func(h *hostile) bool {
		return h.forged("owner identity: boot_id is missing", func(o, s *owner.Identity) { *o = h.baitID; o.BootID = "" })
	}},
	{"live owner's identity without host", func(h *hostile) bool {
		return h.forged("owner identity: host is missing", func(o, s *owner.Identity) { *o = h.baitID; o.Host = "" })
	}},
	{"live owner's identity with pid 0", func(h *hostile) bool {
		return h.forged("owner pid 0", func(o, s *owner.Identity) { *o = h.baitID; o.PID = 0 })
	}},
	{"live subject's identity with start time 0", func(h *hostile) bool {
		return h.forged("subject identity: start_time is missing", func(o, s *owner.Identity) { s.StartTime = 0 })
	}},
	{"live subject's identity without boot id", func(h *hostile) bool {
		return h.forged("subject identity: boot_id is missing", func(o, s *owner.Identity) { s.BootID = "" })
	}},
	{"live subject's identity without host", func(h *hostile) bool {
		return h.forged("subject identity: host is missing", func(o, s *owner.Identity) { s.Host = "" })
	}},
	{"pgid 1", hostilePGID1},
	{"label with escape sequences and a forged summary line", hostileLabelEscapes},
	{"path with invalid UTF-8 beside a file named with U+FFFD", func(h *hostile) bool { return h.repairedName("\"bad\xff\"", "invalid UTF-8") }},
	{"path with a lone surrogate beside a file named with U+FFFD", func(h *hostile) bool { return h.repairedName(`"bad\udcff"`, "lone surrogate") }},
	{"recorded group holds the recoverer's runner", hostileAncestorGroup},
	{"sockets that accept and never answer, listed 8 times each", hostileMuteSockets},
}

// forgedRecord is the bait record (the bait as subject and group leader, a
// dead owner) after forge, encoded without validation, as a forger writes it.
func (h *hostile) forgedRecord(id string, forge func(o, s *owner.Identity)) []byte {
	h.t.Helper()
	o, s := h.dead, h.baitID
	forge(&o, &s)
	rec := &journal.Record{Version: journal.SchemaVersion, ID: id, Kind: journal.KindProcess, Label: "bait",
		Subject: &s, PGID: h.baitID.PID, Owner: o, Phase: journal.PhaseLive, Created: time.Now().UTC()}
	b, err := json.Marshal(rec)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// forged plants the bait record after forge: it must be corrupt for reason.
func (h *hostile) forged(reason string, forge func(o, s *owner.Identity)) bool {
	return h.plantRecord(reason, func(path string, valid []byte) {
		id := strings.TrimSuffix(filepath.Base(path), ".json")
		h.write(path, h.forgedRecord(id, forge))
	})
}

func (h *hostile) write(path string, b []byte) {
	h.t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// hostilePGID1: the subject claims to be init leading group 1; a probe of
// that group is kill(-1, 0).
func hostilePGID1(h *hostile) bool {
	return h.plantRecord("pgid 1", func(path string, valid []byte) {
		id := strings.TrimSuffix(filepath.Base(path), ".json")
		b := h.forgedRecord(id, func(o, s *owner.Identity) { s.PID = 1 })
		h.write(path, bytes.Replace(b, []byte(fmt.Sprintf(`"pgid":%d`, h.baitID.PID)), []byte(`"pgid":1`), 1))
	})
}

// hostileText clears the screen, sets the terminal's title and forges a
// summary line.
const hostileText = "x\x1b[2J\x1b]0;pwned\x07\nrecover (all) FORGED: 0 orphan; 0 retained; root removed\r"

// hostileLabelEscapes: a record whose label holds hostileText, a records/
// entry and an unrecorded entry named with it. The record is corrupt, and
// neither status nor recover (nor their logs) prints a raw control byte or
// a forged summary line.
func hostileLabelEscapes(h *hostile) bool {
	refused := h.plantRecord("control character U+001B", func(path string, valid []byte) {
		lb, _ := json.Marshal(hostileText)
		h.write(path, bytes.Replace(valid, []byte(`"label": "bait"`), []byte(`"label": `+string(lb)), 1))
		h.write(filepath.Join(filepath.Dir(path), hostileText+".json"), []byte("{}"))
		h.write(filepath.Join(h.rs.root, hostileText), nil)
	})
	for _, args := range [][]string{
		{"status", "--root", h.rs.root},
		{"status", "--json", "--root", h.rs.root},
		{"recover", "--all", "--grace", "1s", "--root", h.rs.root},
		{"recover", "--json", "--all", "--grace", "1s", "--root", h.rs.root},
	} {
		out, code := h.cli(nil, nil, args...)
		if code != 3 {
			h.t.Errorf("%v: exit %d, want 3", args, code)
			refused = false
		}
		for i := 0; i < len(out); i++ {
			if c := out[i]; (c < 0x20 && c != '\n') || c == 0x7f {
				h.t.Errorf("%v: raw control byte %#02x in the output:\n%q", args, c, out)
				refused = false
				break
			}
		}
		if strings.Contains(out, "\nrecover (all) FORGED") || strings.HasPrefix(out, "recover (all) FORGED") {
			h.t.Errorf("%v: a forged summary line:\n%s", args, out)
			refused = false
		}
	}
	return refused
}

// repairedName: a path record names bad followed by raw (a JSON string
// body that encoding/json would decode to "bad\uFFFD"), and the root holds a
// file named "bad\uFFFD". The record is corrupt and the file survives.
func (h *hostile) repairedName(raw, reason string) bool {
	victim := filepath.Join(h.rs.root, "bad\uFFFD")
	refused := h.plantRecord(reason, func(path string, valid []byte) {
		id := strings.TrimSuffix(filepath.Base(path), ".json")
		b, _ := json.Marshal(&journal.Record{Version: journal.SchemaVersion, ID: id, Kind: journal.KindPath, Label: "names",
			Owner: h.dead, Paths: []string{"placeholder"}, Phase: journal.PhaseLive, Created: time.Now().UTC()})
		h.write(path, bytes.Replace(b, []byte(`"placeholder"`), []byte(raw), 1))
		h.write(victim, []byte("keep\n"))
	})
	if _, err := os.Lstat(victim); err != nil {
		h.t.Errorf("the file named with U+FFFD was removed: %v", err)
		refused = false
	}
	return refused
}

// hostileAncestorGroup: a runner (a shell) in the bait's process group runs
// `setsid ownerjournal recover --all` on a valid record of the bait's group.
// The group holds the recoverer's parent: the signal is refused, the record
// retained, and runner and bait live. Believing it kills the runner (143).
func hostileAncestorGroup(h *hostile) bool {
	j, err := journal.Open(h.rs.root)
	if err != nil {
		h.t.Fatal(err)
	}
	j.Close()
	id, valid := h.baitRecord()
	path := filepath.Join(h.rs.root, "records", id+".json")
	h.write(path, valid)
	h.before = snapshot(h.outside)
	cmd := exec.Command("/bin/sh", "-c", `setsid "$0" recover --all --grace 1s --root "$1"; echo "recover exit $?"`, h.e.cli, h.rs.root)
	cmd.Env = withoutTMUX(os.Environ())
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: h.baitID.PID}
	out, code, err := h.e.run(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	ok := code == 0 && strings.Contains(out, "recover exit 3") && strings.Contains(out, "an ancestor of the caller")
	if !ok {
		h.t.Errorf("runner in the recorded group: exit %d (143: killed by the group's SIGTERM):\n%s", code, out)
	}
	if _, err := os.Stat(path); err != nil {
		h.t.Errorf("the record was not retained: %v", err)
		ok = false
	}
	return ok
}

// hostileMuteSockets: one tmux record lists three sockets, eight times
// each, whose server (here, in the test process) accepts and never answers.
// Each distinct socket is asked once, with a short timeout: recovery ends
// far inside its deadline, retains the record and says why, once per socket.
func hostileMuteSockets(h *hostile) bool {
	j, err := journal.Open(h.rs.root)
	if err != nil {
		h.t.Fatal(err)
	}
	defer j.Close()
	var mu sync.Mutex
	var held []net.Conn
	socks := []string{"m1.sock", "m2.sock", "m3.sock"}
	for _, s := range socks {
		l, err := net.Listen("unix", filepath.Join(h.rs.root, s))
		if err != nil {
			h.t.Fatal(err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		h.t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				held = append(held, c)
				mu.Unlock()
			}
		}()
	}
	h.t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	var listed []string
	for i := 0; i < 8; i++ {
		listed = append(listed, socks...)
	}
	if err := j.Publish(h.t.Context(), &journal.Record{Kind: journal.KindTmux, Label: "mute sockets", Owner: h.dead,
		Sockets: listed, Phase: journal.PhaseIntent}); err != nil {
		h.t.Fatal(err)
	}
	const grace = time.Second
	deadline := recover.Options{Grace: grace}.Deadline()
	t0 := time.Now()
	out, code := h.cli(nil, nil, "recover", "--grace", grace.String(), "--root", h.rs.root)
	took := time.Since(t0)
	h.t.Logf("recover --grace %v on %d listings of %d mute sockets: %v (deadline %v)", grace, len(listed), len(socks), took.Round(time.Millisecond), deadline)
	ok := code == 3 && strings.Contains(out, "does not answer") && took < deadline
	for _, s := range socks {
		// Said once on the "retained" line of the report and once in the log.
		ok = ok && strings.Count(out, filepath.Join(h.rs.root, s)+" ") == 2
	}
	if !ok {
		h.t.Errorf("mute sockets: exit %d after %v (deadline %v):\n%s", code, took, deadline, out)
	}
	return ok
}
