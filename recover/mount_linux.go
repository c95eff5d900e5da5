package recover

import "golang.org/x/sys/unix"

// mountOf returns the id of the mount that holds name in directory dirfd
// (dirfd itself for an empty name), without following a symlink: statx(2)
// with STATX_MNT_ID (Linux 5.8+). A bind mount of a file or directory of
// the same filesystem keeps st_dev; only the mount id tells it apart. On a
// kernel without it the id is 0 and only st_dev is compared.
func mountOf(dirfd int, name string) (uint64, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var stx unix.Statx_t
	if err := ignoringEINTR(func() error { return unix.Statx(dirfd, name, flags, unix.STATX_MNT_ID, &stx) }); err != nil {
		return 0, err
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		return 0, nil
	}
	return stx.Mnt_id, nil
}
