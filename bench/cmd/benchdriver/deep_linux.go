package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/recover"
)

// remove-deep: recover.Run on a root whose one stale record names a tree
// 3,000 directories deep ÷ the same for 1,000 deep. A walk that resolves
// each level by descriptor is linear (3); one that re-resolves the whole
// path at every level is quadratic (9 and more).
func (d *driver) removeDeep() error {
	const rounds = 3
	deadOwner, err := benchkit.DeadIdentity()
	if err != nil {
		return err
	}
	once := func(levels int) (time.Duration, error) {
		p, err := d.privateDir()
		if err != nil {
			return 0, err
		}
		if err := deepTree(filepath.Join(p, "deep"), levels); err != nil {
			return 0, err
		}
		r, err := journal.Open(p)
		if err != nil {
			return 0, err
		}
		defer r.Close()
		ctx := context.Background()
		if err := r.Publish(ctx, &journal.Record{Kind: journal.KindPath, Label: "deep", Owner: deadOwner, Phase: journal.PhaseLive, Paths: []string{"deep"}}); err != nil {
			return 0, err
		}
		t0 := time.Now()
		rep, err := recover.Run(ctx, r, recover.Options{Grace: time.Second})
		took := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if !rep.Clean() || !rep.RootRemoved {
			return 0, fmt.Errorf("recover of a %d-deep tree: %d retained, root kept: %s", levels, rep.Retained, rep.RootKept)
		}
		return took, nil
	}
	var t1k, t3k []time.Duration
	for round := 0; round < rounds; round++ {
		a, err := once(1000)
		if err != nil {
			return err
		}
		b, err := once(3000)
		if err != nil {
			return err
		}
		t1k, t3k = append(t1k, a), append(t3k, b)
	}
	m1, m3 := benchkit.Median(t1k), benchkit.Median(t3k)
	report("remove-deep", ratio(m3, m1), "3,000 levels %s vs 1,000 levels %s (median of %d); linear is 3", ms(m3), ms(m1), rounds)
	return nil
}

// deepTree makes top and levels nested directories "d" below it, a file
// in every tenth, by descriptor (the paths exceed PATH_MAX).
func deepTree(top string, levels int) error {
	if err := unix.Mkdir(top, 0o700); err != nil {
		return err
	}
	fd, err := unix.Open(top, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	for i := 0; i < levels; i++ {
		if i%10 == 0 {
			f, err := unix.Openat(fd, "f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			if err != nil {
				unix.Close(fd)
				return err
			}
			unix.Close(f)
		}
		if err := unix.Mkdirat(fd, "d", 0o700); err != nil {
			unix.Close(fd)
			return err
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return err
		}
		fd = next
	}
	return unix.Close(fd)
}
