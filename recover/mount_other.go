//go:build !linux

package recover

// mountOf is 0 where there is no mount id: only st_dev is compared.
func mountOf(dirfd int, name string) (uint64, error) { return 0, nil }
