package reliability

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/journal"
)

// Hostile writers (issue 11): someone who can write inside the root (the
// same UID, or a worker of another UID given a directory in it) or next to
// it tries to turn recovery against its own journal or against what lies
// outside. Each case is refused: nothing of the journal is lost, nothing
// outside is touched, and no "root removed" is reported for a root that
// was not removed.

// hostileInRootSymlink: a stale record names l/<ID>.json and l, where l is
// a symlink to records/ inside the root and <ID> a live record (its owner,
// the bait, runs). The live record survives, the stale one is retained
// with the path and the reason, and the root stays.
func hostileInRootSymlink(h *hostile) bool {
	j, err := journal.Open(h.rs.root)
	require.NoError(h.t, err)
	defer j.Close()
	subj := h.baitID
	live := &journal.Record{Kind: journal.KindProcess, Label: "live", Subject: &subj, Owner: h.baitID, Phase: journal.PhaseLive}
	require.NoError(h.t, j.Publish(context.Background(), live))
	require.NoError(h.t, os.Symlink("records", filepath.Join(h.rs.root, "l")))
	require.NoError(h.t, j.Publish(context.Background(), &journal.Record{Kind: journal.KindPath, Label: "redirect",
		Owner: h.dead, Paths: []string{"l/" + live.ID + ".json", "l"}, Phase: journal.PhaseLive}))
	out, code := h.cli(nil, nil, "recover", "--root", h.rs.root, "--grace", "1s")
	refused := h.refusedWith(out, code, 3, filepath.Join(h.rs.root, "l"), "symlink")
	if _, err := os.Lstat(filepath.Join(h.rs.root, "records", live.ID+".json")); err != nil {
		h.t.Errorf("the live record was deleted through the symlink: %v", err)
		refused = false
	}
	if strings.Contains(out, "root removed") {
		h.t.Errorf("root removed while a live record's owner runs:\n%s", out)
		refused = false
	}
	return refused
}

// hostileHardLinkedSocket: a recorded tmux socket is a hard link (nlink 2)
// to the listening socket outside the root. It is refused by path and
// reason and never connected to (the caller counts the outside accepts).
func hostileHardLinkedSocket(h *hostile) bool {
	j, err := journal.Open(h.rs.root)
	require.NoError(h.t, err)
	defer j.Close()
	sock := filepath.Join(h.rs.root, "s")
	require.NoError(h.t, os.Link(filepath.Join(h.outside, "bait.sock"), sock))
	h.before = snapshot(h.outside)
	subj := h.dead
	require.NoError(h.t, j.Publish(context.Background(), &journal.Record{Kind: journal.KindTmux, Label: "hard-linked socket",
		Subject: &subj, Owner: h.dead, Sockets: []string{"s"}, Phase: journal.PhaseLive}))
	out, code := h.cli(nil, nil, "recover", "--root", h.rs.root, "--all", "--grace", "1s")
	refused := h.refusedWith(out, code, 3, sock, "has 2 links")
	if _, err := os.Lstat(sock); err != nil {
		h.t.Errorf("the hard link was removed: %v", err)
		refused = false
	}
	return refused
}

// hostileForeignAncestor: the root lies in a directory another user owns
// (who could rename it and swap the root for a directory of their own).
// Every subcommand refuses it with exit 1, naming the directory, its owner
// and its mode; the orphan recorded in it is not signalled.
func hostileForeignAncestor(h *hostile) bool {
	dir := filepath.Join(h.rs.dir, "theirs")
	require.NoError(h.t, os.Mkdir(dir, 0o755))
	require.NoError(h.t, os.Chown(dir, h.uid, h.gid))
	root := filepath.Join(dir, "r")
	require.NoError(h.t, os.Mkdir(root, 0o700))
	refused := true
	for _, args := range [][]string{
		{"recover", "--root", root, "--all", "--grace", "1s"},
		{"recover", "--root", root, "--all", "--missing-ok"},
		{"status", "--root", root},
		{"publish", "--root", root, "--pid", strconv.Itoa(h.baitID.PID)},
	} {
		out, code := h.cli(nil, nil, args...)
		refused = h.refusedWith(out, code, 1, dir, "owned by uid "+strconv.Itoa(h.uid)+" (mode 0755)") && refused
		if strings.Contains(out, "root removed") {
			h.t.Errorf("%s said root removed:\n%s", args[0], out)
			refused = false
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		h.t.Errorf("something was created in the refused root")
		refused = false
	}
	return refused
}

// hostileMistypedRoot: a root that does not exist is an error (exit 1, "no
// root at PATH"), never "root removed"; only --missing-ok makes it nothing
// to recover, and says so.
func hostileMistypedRoot(h *hostile) bool {
	root := filepath.Join(h.rs.dir, "nope")
	out, code := h.cli(nil, nil, "recover", "--root", root, "--all", "--json")
	refused := h.refusedWith(out, code, 1, root, "no root at")
	if strings.Contains(out, `"root_removed": true`) || strings.Contains(out, "root removed") {
		h.t.Errorf("a missing root was reported removed:\n%s", out)
		refused = false
	}
	out, code = h.cli(nil, nil, "status", "--root", root)
	refused = h.refusedWith(out, code, 1, root, "no root at") && refused
	out, code = h.cli(nil, nil, "recover", "--root", root, "--all", "--missing-ok", "--json")
	if code != 0 || !strings.Contains(out, `"root_missing": true`) || !strings.Contains(out, `"root_removed": false`) {
		h.t.Errorf("recover --missing-ok on a missing root: exit %d:\n%s", code, out)
		refused = false
	}
	return refused
}
