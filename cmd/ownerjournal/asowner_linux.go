package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// asOwner implements `recover --as-owner`. A root belongs to one user and a
// recoverer must never do more than that user (the records' writer) could:
// root, cleaning up after a job that ran as another user, re-executes
// itself with exactly that user's UID, GID and supplementary groups
// (exec.Cmd's Credential: setgroups, then setgid and setuid, which for root
// set the real, effective and saved IDs and clear every capability,
// capabilities(7)) and waits for it, forwarding signals and passing its exit
// status on. handled is false when nothing has to change (the root is the
// caller's own) and the recovery goes on in this process; in the
// re-executed child it is false once the child has verified that it holds
// exactly those credentials and no capability.
func (c *cli) asOwner(root string, args []string) (handled bool, err error) {
	if want, ok := os.LookupEnv(envAsOwner); ok {
		os.Unsetenv(envAsOwner)
		if err := verifyDropped(want); err != nil {
			return true, fmt.Errorf("--as-owner: %w; refusing to recover", err)
		}
		fmt.Fprintf(c.stderr, "ownerjournal recover: running as the root's owner (%s), no capabilities\n", want)
		return false, nil
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return true, err
	}
	fi, err := os.Lstat(abs)
	if err != nil {
		// journal.Open reports a missing or unreadable root as usual.
		return false, nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.IsDir() || int(st.Uid) == os.Geteuid() {
		return false, nil
	}
	if os.Geteuid() != 0 {
		return true, fmt.Errorf("--as-owner: %s is owned by uid %d; only root can recover as another user", abs, st.Uid)
	}
	cred, want, err := credentialOf(int(st.Uid))
	if err != nil {
		return true, fmt.Errorf("--as-owner: %s: %w", abs, err)
	}
	exe, err := os.Executable()
	if err != nil {
		return true, err
	}
	cmd := exec.Command(exe, append(append([]string{"recover"}, args...), "--root", abs)...)
	cmd.Args[0] = "ownerjournal"
	cmd.Env = append(os.Environ(), envAsOwner+"="+want)
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.stdout, c.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return true, fmt.Errorf("--as-owner: start as uid %d: %w", st.Uid, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ee):
		code := ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		return true, &exitError{code}
	}
	return true, err
}

// credentialOf returns the credentials of the user uid from the user and
// group databases, and their "UID:GID:G1,G2" form.
func credentialOf(uid int) (*syscall.Credential, string, error) {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return nil, "", fmt.Errorf("owner uid %d: %w (its groups cannot be known)", uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, "", fmt.Errorf("user %s: gid %q: %w", u.Username, u.Gid, err)
	}
	names, err := u.GroupIds()
	if err != nil {
		return nil, "", fmt.Errorf("user %s: groups: %w", u.Username, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	for _, g := range names {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			return nil, "", fmt.Errorf("user %s: group %q: %w", u.Username, g, err)
		}
		cred.Groups = append(cred.Groups, uint32(n))
	}
	slices.Sort(cred.Groups)
	cred.Groups = slices.Compact(cred.Groups)
	return cred, formatCred(int(cred.Uid), int(cred.Gid), cred.Groups), nil
}

func formatCred(uid, gid int, groups []uint32) string {
	gs := make([]string, len(groups))
	for i, g := range groups {
		gs[i] = strconv.FormatUint(uint64(g), 10)
	}
	return fmt.Sprintf("%d:%d:%s", uid, gid, strings.Join(gs, ","))
}

// verifyDropped checks that the process holds exactly the credentials want
// ("UID:GID:G1,G2") as its real, effective and saved IDs, those
// supplementary groups, and no capability (permitted, effective or
// inheritable; capget(2)).
func verifyDropped(want string) error {
	ruid, euid, suid := unix.Getresuid()
	rgid, egid, sgid := unix.Getresgid()
	groups, err := unix.Getgroups()
	if err != nil {
		return os.NewSyscallError("getgroups", err)
	}
	gs := make([]uint32, len(groups))
	for i, g := range groups {
		gs[i] = uint32(g)
	}
	slices.Sort(gs)
	gs = slices.Compact(gs)
	if ruid != euid || euid != suid || rgid != egid || egid != sgid {
		return fmt.Errorf("uids %d/%d/%d, gids %d/%d/%d are not one user's", ruid, euid, suid, rgid, egid, sgid)
	}
	if got := formatCred(euid, egid, gs); got != want {
		return fmt.Errorf("running as %s, not %s", got, want)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return os.NewSyscallError("capget", err)
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities left: %+v", data)
		}
	}
	return nil
}
