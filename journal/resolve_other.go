//go:build !linux

package journal

// oPath is 0 where the kernel has no O_PATH: the walk opens read-only.
const oPath = 0

// resolveDir walks one component at a time: openat2(2) is Linux only.
func resolveDir(rootfd int, dev uint64, rel string) (int, error) {
	return walkDir(rootfd, dev, rel)
}
