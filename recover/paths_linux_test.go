package recover

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// TestRemoveTreeInRootSymlink: issue 11, first reproduction. A stale record
// names l/<ID>.json and l, with l -> records inside the root: the live
// record <ID> is not deleted through the symlink (os.Root followed it), the
// symlink is removed itself, the stale record is retained with the reason,
// and the root stays while the live record's owner and subject live.
func TestRemoveTreeInRootSymlink(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	self, err := owner.Self()
	require.NoError(t, err)
	live := startSleeper(t)
	liveRec := publish(t, r, &journal.Record{Label: "live", Subject: &live.ID, Owner: self})
	require.NoError(t, os.Symlink("records", filepath.Join(dir, "l")))
	stale := publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: deadIdentity(t), Paths: []string{"l/" + liveRec.ID + ".json", "l"}})
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	require.Contains(t, records(t, r), liveRec.ID, "the live record must survive")
	require.False(t, rep.RootRemoved, "the root holds a live record")
	a := actionFor(t, rep, stale.ID)
	require.Contains(t, a.Retained, "symlink")
	require.Contains(t, a.Done, "removed l", "the symlink itself is removed")
	requireState(t, owner.Alive, live.ID, "the live record's subject")
	_, err = os.Lstat(filepath.Join(dir, "l"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// childSwapper runs as the second user with a recorded scratch directory
// it owns as fd 3, and swaps scratch/subK (a directory) with scratch/altK
// (a symlink to ../records) with renameat2(RENAME_EXCHANGE), K < $OJ_PAIRS,
// in a loop until it is killed.
func childSwapper() int {
	n, err := strconv.Atoi(os.Getenv("OJ_PAIRS"))
	if err != nil {
		return fail(err)
	}
	for round := 0; ; round++ {
		for k := 0; k < n; k++ {
			s := strconv.Itoa(k)
			unix.Renameat2(3, "sub"+s, 3, "alt"+s, unix.RENAME_EXCHANGE)
		}
		if round == 0 {
			if err := testroot.Ready("swapping", nil); err != nil {
				return fail(err)
			}
		}
	}
}

// swapRaceTries is how many roots TestRemoveTreeSwapRace attacks; the old
// os.Root walk lost records in about one try in ten.
const swapRaceTries = 60

// TestRemoveTreeSwapRace: issue 11, second reproduction. A root-owned root
// records scratch/, which a worker of another UID owns; the worker swaps
// its subdirectories with symlinks to ../records in a loop while root's
// recovery removes scratch/. No try may delete a journal record: the
// worker can make the removal fail (retained), never redirect it.
func TestRemoveTreeSwapRace(t *testing.T) {
	uid, gid := testroot.SecondUser(t)
	self, err := owner.Self()
	require.NoError(t, err)
	live := startSleeper(t)
	const pairs = 48
	lost, retained := 0, 0
	for try := 0; try < swapRaceTries; try++ {
		r, dir := openRoot(t)
		var liveIDs []string
		for i := 0; i < 4; i++ {
			liveIDs = append(liveIDs, publish(t, r, &journal.Record{Label: "live", Subject: &live.ID, Owner: self}).ID)
		}
		scratch := filepath.Join(dir, "scratch")
		require.NoError(t, os.Mkdir(scratch, 0o700))
		for k := 0; k < pairs; k++ {
			sub := filepath.Join(scratch, "sub"+strconv.Itoa(k))
			require.NoError(t, os.Mkdir(sub, 0o700))
			for f := 0; f < 4; f++ {
				require.NoError(t, os.WriteFile(filepath.Join(sub, "f"+strconv.Itoa(f)), nil, 0o600))
			}
			require.NoError(t, os.Symlink("../records", filepath.Join(scratch, "alt"+strconv.Itoa(k))))
		}
		require.NoError(t, filepath.Walk(scratch, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		}))
		publish(t, r, &journal.Record{Kind: journal.KindPath, Label: "scratch", Owner: deadIdentity(t), Paths: []string{"scratch"}})
		sd, err := os.Open(scratch)
		require.NoError(t, err)
		c := testroot.StartOpts(t, "swapper", testroot.Options{
			Env:        []string{"OJ_PAIRS=" + strconv.Itoa(pairs)},
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
			ExtraFiles: []*os.File{sd},
		})
		sd.Close()
		c.WaitReady("swapping")
		rep, err := Run(context.Background(), r, Options{Grace: time.Second})
		c.Kill()
		require.NoError(t, err)
		for _, id := range liveIDs {
			if _, err := os.Lstat(filepath.Join(dir, "records", id+".json")); err != nil {
				lost++
				break
			}
		}
		if !rep.Clean() {
			retained++
		}
	}
	t.Logf("%d tries with %d swapping pairs: %d lost journal records, %d retained the scratch record", swapRaceTries, pairs, lost, retained)
	require.Zero(t, lost, "a worker of another UID redirected root's removal into records/")
	requireState(t, owner.Alive, live.ID, "the live records' subject")
}

// TestRemoveTreeDeep: issue 11, deep trees. A 3,000-level tree is removed
// whole by descriptor with at most maxOpenDirs (here 4) directories open
// at once, the levels above reached again through "..".
func TestRemoveTreeDeep(t *testing.T) {
	old := maxOpenDirs
	maxOpenDirs = 4
	r, dir := openRoot(t)
	makeDeepTree(t, filepath.Join(dir, "deep"), 3000)
	rec := publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: deadIdentity(t), Paths: []string{"deep"}})
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(ents)
	}
	base := fds()
	maxHeld, maxFds, entered := 0, 0, 0
	walkHook = func(open int) {
		maxHeld = max(maxHeld, open)
		if entered++; entered%250 == 0 {
			maxFds = max(maxFds, fds()-base)
		}
	}
	t.Cleanup(func() { maxOpenDirs, walkHook = old, func(int) {} })
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	require.Equal(t, 3001, entered, "every level entered once")
	require.LessOrEqual(t, maxHeld, 4)
	// The walk's levels, the parent from OpenParent, ReadDir's own.
	require.LessOrEqual(t, maxFds, 4+2, "descriptors held during the walk")
	a := actionFor(t, rep, rec.ID)
	require.Empty(t, a.Retained)
	require.Contains(t, a.Done, "removed deep")
	require.True(t, rep.RootRemoved, rep.RootKept)
}

// makeDeepTree makes top with n nested directories "d" below it (paths far
// longer than PATH_MAX), a file in every tenth, by descriptor.
func makeDeepTree(t *testing.T, top string, n int) {
	t.Helper()
	require.NoError(t, os.Mkdir(top, 0o700))
	fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		if i%10 == 0 {
			f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			require.NoError(t, err)
			unix.Close(f)
		}
		require.NoError(t, unix.Mkdirat(fd, "d", 0o700))
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		unix.Close(fd)
		fd = next
	}
	unix.Close(fd)
}

// TestRemoveTreeStopsAtMounts: a mount point inside a recorded tree (a
// real tmpfs) is not crossed: what is mounted there survives, the record
// is retained with the reason.
func TestRemoveTreeStopsAtMounts(t *testing.T) {
	t.Parallel()
	r, dir := openRoot(t)
	mnt := filepath.Join(dir, "scratch", "mnt")
	require.NoError(t, os.MkdirAll(mnt, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "scratch", "f"), nil, 0o600))
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	require.NoError(t, os.WriteFile(filepath.Join(mnt, "keep"), []byte("keep"), 0o600))
	// A bind mount of a directory on the same filesystem keeps st_dev;
	// its mount id tells it apart.
	outside := testroot.Dir(t)
	require.NoError(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o600))
	bind := filepath.Join(dir, "scratch", "bind")
	require.NoError(t, os.Mkdir(bind, 0o700))
	require.NoError(t, unix.Mount(outside, bind, "", unix.MS_BIND, ""))
	t.Cleanup(func() { unix.Unmount(bind, unix.MNT_DETACH) })
	rec := publish(t, r, &journal.Record{Kind: journal.KindPath, Owner: deadIdentity(t), Paths: []string{"scratch"}})
	rep, err := Run(context.Background(), r, Options{Grace: time.Second})
	require.NoError(t, err)
	retained := actionFor(t, rep, rec.ID).Retained
	require.Contains(t, retained, "scratch/mnt: is on another mount")
	require.Contains(t, retained, "scratch/bind: is on another mount")
	for _, p := range []string{filepath.Join(mnt, "keep"), filepath.Join(outside, "keep")} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		require.Equal(t, "keep", string(b))
	}
}
