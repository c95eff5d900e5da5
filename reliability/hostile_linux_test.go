package reliability

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// hostile is one hostile-input case. Every case gets a run directory with a
// valid root (DIR/r) and, next to it, DIR/outside: bait that recovery must
// never touch (files, a tree, a listening socket) and a bait process that
// records every signal. Records planted by a case name the bait process with
// its true identity and a dead owner: believing such a record would kill it.
type hostile struct {
	t       *testing.T
	e       *env
	rs      *runState
	outside string
	bait    *proc
	baitID  owner.Identity
	baitSig string
	dead    owner.Identity
	before  map[string]string // outside, once the case has set up
	uid     int               // the second user
	gid     int
	accepts atomic.Int32 // connections to the outside listener
}

func testHostile(t *testing.T, e *env) {
	uid, gid := testroot.SecondUser(t)
	cases := []struct {
		name string
		fn   func(h *hostile) bool
	}{
		{"symlinked base", hostileSymlinkedBase},
		{"base owned by another user, pre-created in /tmp", hostileForeignTmpBase},
		{"base owned by another user", hostileForeignBase},
		{"root owned by another user, pre-created in the base", hostileForeignRootInBase},
		{"symlinked root", hostileSymlinkedRoot},
		{"root owned by another user", hostileForeignRoot},
		{"group-writable root", func(h *hostile) bool { return h.rootMode(0o770, "accessible to group or others") }},
		{"world-writable root", func(h *hostile) bool { return h.rootMode(0o777, "accessible to group or others") }},
		{"group-readable root", func(h *hostile) bool { return h.rootMode(0o750, "accessible to group or others") }},
		{"record is a symlink", hostileRecordSymlink},
		{"record is a FIFO", hostileRecordFIFO},
		{"record is a directory", hostileRecordDir},
		{"record is a hard link to a file elsewhere", hostileRecordHardLink},
		{"record owned by another user", hostileRecordForeign},
		{"record is group-writable", hostileRecordGroupWritable},
		{"record over 64 KiB", hostileRecordHuge},
		{"record is not JSON", hostileRecordNotJSON},
		{"record of an unknown version", hostileRecordVersion},
		{"record socket with ..", func(h *hostile) bool { return h.recordSocket("../outside/bait.sock") }},
		{"record socket outside the root", func(h *hostile) bool { return h.recordSocket(filepath.Join(h.outside, "bait.sock")) }},
		{"publish --socket outside the root", func(h *hostile) bool { return h.publishOutside("--socket", filepath.Join(h.outside, "bait.sock")) }},
		{"publish --path with ..", func(h *hostile) bool { return h.publishOutside("--path", "../outside/tree") }},
		{"socket owned by another user", hostileForeignSocket},
		{"path resource is a symlink out of the root", hostileSymlinkPath},
		{"TMUX in the caller's environment", hostileTMUX},
		{"record naming the bait in another PID namespace", hostileForeignNamespace},
		{"cgroup removed and made again under the recorded name", hostileCgroupReplaced},
		{"free lease without a boot id naming a live owner", hostileLegacyFreeLease},
		{"recorded path through an in-root symlink to records/", hostileInRootSymlink},
		{"recorded socket hard-linked to a socket outside the root", hostileHardLinkedSocket},
		{"root under a directory another user owns", hostileForeignAncestor},
		{"mistyped root", hostileMistypedRoot},
	}
	cases = append(cases, identityHostile...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHostile(t, e, uid, gid)
			h.before = snapshot(h.outside)
			refused := c.fn(h)
			if d := diff(h.before, snapshot(h.outside)); d != "" {
				t.Errorf("outside the root changed:\n%s", d)
				refused = false
			}
			if n := h.accepts.Load(); n > 0 {
				t.Errorf("the outside socket was connected to %d time(s)", n)
				refused = false
			}
			wrong := 0
			if b, _ := os.ReadFile(h.baitSig); len(b) > 0 {
				t.Errorf("bait process got signals:\n%s", b)
				wrong += strings.Count(string(b), "\n")
			}
			if h.bait.exited() {
				t.Errorf("bait process was killed")
				wrong++
			}
			wrong += e.checkBystanders(t, c.name)
			assert.True(t, refused, "hostile input accepted")
			sum.addHostile(refused)
			sum.add(0, 0, wrong, 0)
		})
	}
}

func newHostile(t *testing.T, e *env, uid, gid int) *hostile {
	t.Helper()
	h := &hostile{t: t, e: e, rs: e.newRun(t, "hostile", 0), uid: uid, gid: gid}
	h.outside = filepath.Join(h.rs.dir, "outside")
	require.NoError(t, os.MkdirAll(filepath.Join(h.outside, "tree", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(h.outside, "tree", "sub", "keep.txt"), []byte("keep\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(h.outside, "file.txt"), []byte("keep\n"), 0o644))
	l, err := net.Listen("unix", filepath.Join(h.outside, "bait.sock"))
	require.NoError(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			h.accepts.Add(1)
			c.Close()
		}
	}()
	h.baitSig = filepath.Join(h.rs.dir, "bait-signals")
	h.bait = e.child(t, "sigcounter", childOpts{env: tagEnv(h.rs.tag, "OJ_REL_SIGFILE="+h.baitSig), pgid: true, stdin: true})
	h.bait.waitReady(t, "ready")
	h.baitID, err = owner.Of(h.bait.pid())
	require.NoError(t, err)
	h.dead = e.deadIdentity(t)
	return h
}

// cli runs ownerjournal with args and extra environment.
func (h *hostile) cli(env []string, cred *syscall.Credential, args ...string) (string, int) {
	h.t.Helper()
	cmd := exec.Command(h.e.cli, args...)
	cmd.Env = append(withoutTMUX(os.Environ()), env...)
	cmd.Dir = "/"
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	out, code, err := h.e.run(cmd)
	require.NoError(h.t, err)
	return out, code
}

// refusedWith reports whether a command exited with code and said both the
// path and the reason.
func (h *hostile) refusedWith(out string, code, want int, path, reason string) bool {
	h.t.Helper()
	ok := code == want && strings.Contains(out, path) && strings.Contains(out, reason)
	if !ok {
		h.t.Errorf("want exit %d and a message naming %s and %q; got exit %d:\n%s", want, path, reason, code, out)
	}
	return ok
}

// baitRecord is a valid record naming the bait process (true identity) with
// a dead owner: believing it would end the bait.
func (h *hostile) baitRecord() (id string, b []byte) {
	h.t.Helper()
	subj := h.baitID
	rec := &journal.Record{Version: journal.SchemaVersion, ID: journal.NewID(h.dead), Kind: journal.KindProcess, Label: "bait",
		Subject: &subj, PGID: subj.PID, Owner: h.dead, Phase: journal.PhaseLive, Created: time.Now().UTC()}
	b, err := rec.Encode()
	require.NoError(h.t, err)
	return rec.ID, b
}

// plantRecord calls plant with the path of a record file in records/ and a
// valid record naming the bait, then replays the root with `recover --all`:
// the record must be reported corrupt, by path and reason, and retained.
func (h *hostile) plantRecord(reason string, plant func(path string, valid []byte)) bool {
	h.t.Helper()
	// A root with its journal in place, as the CLI creates it.
	j, err := journal.Open(h.rs.root)
	require.NoError(h.t, err)
	j.Close()
	id, valid := h.baitRecord()
	path := filepath.Join(h.rs.root, "records", id+".json")
	plant(path, valid)
	h.before = snapshot(h.outside)
	out, code := h.cli(nil, nil, "recover", "--root", h.rs.root, "--all", "--grace", "1s")
	refused := h.refusedWith(out, code, 3, path, reason)
	// status names it too, and changes nothing.
	out, code = h.cli(nil, nil, "status", "--root", h.rs.root)
	return h.refusedWith(out, code, 3, path, reason) && refused
}

func hostileSymlinkedBase(h *hostile) bool {
	xdg := filepath.Join(h.rs.dir, "xdg")
	require.NoError(h.t, os.Mkdir(xdg, 0o700))
	base := filepath.Join(xdg, "ownerjournal")
	require.NoError(h.t, os.Symlink(h.outside, base))
	out, code := h.cli([]string{"XDG_RUNTIME_DIR=" + xdg}, nil, "root", "hostile")
	return h.refusedWith(out, code, 1, base, "symlink")
}

// hostileForeignTmpBase is tmux issue #3216: another user pre-creates the
// /tmp base of a victim. The victim here is the unprivileged user nobody
// (65534), run without XDG_RUNTIME_DIR; the base is pre-created by the
// second user.
func hostileForeignTmpBase(h *hostile) bool {
	const nobody = 65534
	base := fmt.Sprintf("/tmp/ownerjournal-%d", nobody)
	if _, err := os.Lstat(base); err == nil {
		require.FailNow(h.t, "exists", "%s exists already: remove it (a leftover of an earlier run?)", base)
	}
	require.NoError(h.t, os.Mkdir(base, 0o700))
	h.t.Cleanup(func() { os.RemoveAll(base) })
	require.NoError(h.t, os.Chown(base, h.uid, h.gid))
	env := []string{"XDG_RUNTIME_DIR=", "HOME=/"}
	out, code := h.cli(env, &syscall.Credential{Uid: nobody, Gid: nobody}, "root", "hostile")
	refused := h.refusedWith(out, code, 1, base, fmt.Sprintf("owned by uid %d", h.uid))
	ents, _ := os.ReadDir(base)
	if len(ents) != 0 {
		h.t.Errorf("the foreign base was written to: %v", ents)
		refused = false
	}
	return refused
}

func hostileForeignBase(h *hostile) bool {
	xdg := filepath.Join(h.rs.dir, "xdg")
	require.NoError(h.t, os.Mkdir(xdg, 0o700))
	base := filepath.Join(xdg, "ownerjournal")
	require.NoError(h.t, os.Mkdir(base, 0o700))
	require.NoError(h.t, os.Chown(base, h.uid, h.gid))
	out, code := h.cli([]string{"XDG_RUNTIME_DIR=" + xdg}, nil, "root", "hostile")
	return h.refusedWith(out, code, 1, base, fmt.Sprintf("owned by uid %d", h.uid))
}

func hostileForeignRootInBase(h *hostile) bool {
	xdg := filepath.Join(h.rs.dir, "xdg")
	require.NoError(h.t, os.Mkdir(xdg, 0o700))
	root := filepath.Join(xdg, "ownerjournal", "hostile")
	require.NoError(h.t, os.MkdirAll(root, 0o700))
	require.NoError(h.t, os.Chown(root, h.uid, h.gid))
	out, code := h.cli([]string{"XDG_RUNTIME_DIR=" + xdg}, nil, "root", "hostile")
	refused := h.refusedWith(out, code, 1, root, fmt.Sprintf("owned by uid %d", h.uid))
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		h.t.Errorf("the foreign root was written to")
		refused = false
	}
	return refused
}

func hostileSymlinkedRoot(h *hostile) bool {
	real := filepath.Join(h.outside, "real-root")
	require.NoError(h.t, os.Mkdir(real, 0o700))
	link := filepath.Join(h.rs.dir, "link")
	require.NoError(h.t, os.Symlink(real, link))
	h.before = snapshot(h.outside)
	out, code := h.cli(nil, nil, "recover", "--root", link, "--all")
	return h.refusedWith(out, code, 1, link, "symlink")
}

func hostileForeignRoot(h *hostile) bool {
	root := filepath.Join(h.rs.dir, "foreign")
	require.NoError(h.t, os.Mkdir(root, 0o700))
	require.NoError(h.t, os.Chown(root, h.uid, h.gid))
	out, code := h.cli(nil, nil, "recover", "--root", root, "--all")
	refused := h.refusedWith(out, code, 1, root, fmt.Sprintf("owned by uid %d", h.uid))
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		h.t.Errorf("the foreign root was written to")
		refused = false
	}
	return refused
}

func (h *hostile) rootMode(mode os.FileMode, reason string) bool {
	require.NoError(h.t, os.Chmod(h.rs.root, mode))
	out, code := h.cli(nil, nil, "recover", "--root", h.rs.root, "--all")
	refused := h.refusedWith(out, code, 1, h.rs.root, reason)
	fi, err := os.Stat(h.rs.root)
	require.NoError(h.t, err)
	if fi.Mode().Perm() != mode {
		h.t.Errorf("the root's mode was changed to %v (never repaired)", fi.Mode().Perm())
		refused = false
	}
	if ents, _ := os.ReadDir(h.rs.root); len(ents) != 0 {
		h.t.Errorf("the unsafe root was written to")
		refused = false
	}
	return refused
}

func hostileRecordSymlink(h *hostile) bool {
	return h.plantRecord("symlink", func(path string, valid []byte) {
		target := filepath.Join(h.outside, "record.json")
		require.NoError(h.t, os.WriteFile(target, valid, 0o600))
		require.NoError(h.t, os.Symlink(target, path))
	})
}

func hostileRecordFIFO(h *hostile) bool {
	return h.plantRecord("FIFO", func(path string, valid []byte) {
		require.NoError(h.t, syscall.Mkfifo(path, 0o600))
	})
}

func hostileRecordDir(h *hostile) bool {
	return h.plantRecord("directory", func(path string, valid []byte) {
		require.NoError(h.t, os.Mkdir(path, 0o700))
		require.NoError(h.t, os.WriteFile(filepath.Join(path, "x"), valid, 0o600))
	})
}

func hostileRecordHardLink(h *hostile) bool {
	return h.plantRecord("hard link", func(path string, valid []byte) {
		target := filepath.Join(h.outside, "linked.json")
		require.NoError(h.t, os.WriteFile(target, valid, 0o600))
		require.NoError(h.t, os.Link(target, path))
	})
}

func hostileRecordForeign(h *hostile) bool {
	return h.plantRecord(fmt.Sprintf("owned by uid %d", h.uid), func(path string, valid []byte) {
		require.NoError(h.t, os.WriteFile(path, valid, 0o600))
		require.NoError(h.t, os.Chown(path, h.uid, h.gid))
	})
}

func hostileRecordGroupWritable(h *hostile) bool {
	return h.plantRecord("writable", func(path string, valid []byte) {
		require.NoError(h.t, os.WriteFile(path, valid, 0o600))
		require.NoError(h.t, os.Chmod(path, 0o620))
	})
}

func hostileRecordHuge(h *hostile) bool {
	return h.plantRecord("limit", func(path string, valid []byte) {
		huge := append([]byte(strings.TrimRight(string(valid), "\n")), []byte(strings.Repeat(" ", journal.MaxRecordSize))...)
		require.NoError(h.t, os.WriteFile(path, huge, 0o600))
	})
}

func hostileRecordNotJSON(h *hostile) bool {
	return h.plantRecord("not a record", func(path string, valid []byte) {
		require.NoError(h.t, os.WriteFile(path, []byte("pid=1 kill=yes\n"), 0o600))
	})
}

func hostileRecordVersion(h *hostile) bool {
	return h.plantRecord("version", func(path string, valid []byte) {
		v2 := strings.Replace(string(valid), `"version": 2`, `"version": 3`, 1)
		require.NotEqual(h.t, string(valid), v2)
		require.NoError(h.t, os.WriteFile(path, []byte(v2), 0o600))
	})
}

// recordSocket plants a stale tmux record whose socket lies outside the root.
func (h *hostile) recordSocket(sock string) bool {
	return h.plantRecord("not inside the root", func(path string, valid []byte) {
		id := strings.TrimSuffix(filepath.Base(path), ".json")
		b := fmt.Sprintf(`{"version":1,"id":%q,"kind":"tmux","owner":{"pid":%d,"start_time":%d,"boot_id":%q,"uid":%d,"host":%q},"sockets":[%q],"phase":"intent","created":"2026-01-01T00:00:00Z"}`,
			id, h.dead.PID, h.dead.StartTime, h.dead.BootID, h.dead.UID, h.dead.Host, sock)
		require.NoError(h.t, os.WriteFile(path, []byte(b), 0o600))
	})
}

func (h *hostile) publishOutside(flag, p string) bool {
	j, err := journal.Open(h.rs.root)
	require.NoError(h.t, err)
	j.Close()
	out, code := h.cli(nil, nil, "publish", "--root", h.rs.root, "--pid", fmt.Sprint(h.baitID.PID), "--owner-pid", fmt.Sprint(os.Getpid()), flag, p)
	refused := h.refusedWith(out, code, 1, p, "not inside the root")
	if ents, _ := os.ReadDir(filepath.Join(h.rs.root, "records")); len(ents) != 0 {
		h.t.Errorf("a record was published")
		refused = false
	}
	return refused
}

// hostileForeignSocket: a recorded socket inside the root that belongs to
// another user, with a server behind it. It is neither connected to nor
// unlinked.
func hostileForeignSocket(h *hostile) bool {
	j, err := journal.Open(h.rs.root)
	require.NoError(h.t, err)
	defer j.Close()
	sock := filepath.Join(h.rs.root, "o.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(h.t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	h.t.Cleanup(func() { l.Close() })
	var accepts atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	require.NoError(h.t, os.Chown(sock, h.uid, h.gid))
	require.NoError(h.t, j.Publish(context.Background(), &journal.Record{Kind: journal.KindTmux, Label: "foreign socket",
		Owner: h.dead, Sockets: []string{"o.sock"}, Phase: journal.PhaseIntent}))
	out, code := h.cli(nil, nil, "recover", "--root", h.rs.root, "--all", "--grace", "1s")
	refused := h.refusedWith(out, code, 3, sock, "not owned by uid")
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
		h.t.Errorf("the foreign socket was removed")
		refused = false
	}
	if n := accepts.Load(); n != 0 {
		h.t.Errorf("the foreign socket was connected to %d time(s)", n)
		refused = false
	}
	return refused
}

// hostileSymlinkPath: recorded paths that are, or hold, symlinks out of the
// root. Recovery removes the links, never their targets.
func hostileSymlinkPath(h *hostile) bool {
	j, err := journal.Open(h.rs.root)
	require.NoError(h.t, err)
	defer j.Close()
	require.NoError(h.t, os.Symlink(filepath.Join(h.outside, "tree"), filepath.Join(h.rs.root, "link")))
	require.NoError(h.t, os.MkdirAll(filepath.Join(h.rs.root, "d", "e"), 0o700))
	require.NoError(h.t, os.Symlink(filepath.Join(h.outside, "tree"), filepath.Join(h.rs.root, "d", "e", "deep")))
	require.NoError(h.t, os.Symlink(filepath.Join(h.outside, "file.txt"), filepath.Join(h.rs.root, "d", "f")))
	require.NoError(h.t, j.Publish(context.Background(), &journal.Record{Kind: journal.KindPath, Label: "symlinks out",
		Owner: h.dead, Paths: []string{"link", "d"}, Phase: journal.PhaseLive}))
	out, code := h.cli(nil, nil, "recover", "--root", h.rs.root, "--all", "--grace", "1s")
	ok := code == 0 && strings.Contains(out, "root removed")
	if !ok {
		h.t.Errorf("recovery of symlinked paths: exit %d:\n%s", code, out)
	}
	return ok // and the targets survived: checked by the caller
}

// hostileTMUX: the recovering process has TMUX (and a secret) in its
// environment; the cleanup client (a fake tmux via Options.Tmux that records
// its environment, then runs the real one) must see neither.
func hostileTMUX(h *hostile) bool {
	sock := filepath.Join(h.rs.root, "t.sock")
	cmd := h.e.tmuxCmd(sock, "new-session", "-d", "-s", "t", "sleep 100000")
	cmd.Env = append(cmd.Env, tagEnv(h.rs.tag)...)
	out, err := h.e.output(cmd)
	require.NoError(h.t, err, "%s", out)
	srv := tmuxServer(h.t, h.e, sock)
	j, err := journal.Open(h.rs.root)
	require.NoError(h.t, err)
	defer j.Close()
	require.NoError(h.t, j.Publish(context.Background(), &journal.Record{Kind: journal.KindTmux, Label: "orphan tmux",
		Subject: &srv, Owner: h.dead, Sockets: []string{"t.sock"}, Phase: journal.PhaseLive}))

	envFile := filepath.Join(h.rs.dir, "tmux-env")
	fake := filepath.Join(h.rs.dir, "fake-tmux")
	require.NoError(h.t, os.WriteFile(fake, []byte("#!/bin/sh\nenv >> "+envFile+"\nexec "+h.e.tmux+" \"$@\"\n"), 0o755))
	devSock := h.e.bys.devSock
	h.t.Setenv("TMUX", devSock+",1,0")
	h.t.Setenv("TMUX_PANE", "%0")
	h.t.Setenv("OJ_REL_SECRET", "hunter2")
	rep, err := recover.Run(context.Background(), j, recover.Options{All: true, Grace: time.Second, Tmux: fake})
	require.NoError(h.t, err)
	envs, err := os.ReadFile(envFile)
	require.NoError(h.t, err, "the fake tmux never ran")
	refused := true
	for _, bad := range []string{"TMUX=", "TMUX_PANE=", "OJ_REL_SECRET=", tagVar + "="} {
		if strings.Contains(string(envs), bad) {
			h.t.Errorf("%s reached the cleanup client:\n%s", bad, envs)
			refused = false
		}
	}
	if !rep.Clean() || !rep.RootRemoved {
		h.t.Errorf("recovery: %s", reportText(rep))
		refused = false
	}
	return refused
}

// diff describes the differences of two snapshots.
func diff(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "removed "+k)
		} else if v != w {
			out = append(out, fmt.Sprintf("changed %s: %s -> %s", k, v, w))
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "added "+k)
		}
	}
	return strings.Join(out, "\n")
}
