//go:build linux

package bench

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/ownerjournal/ownerjournal/bench/internal/benchkit"
	"github.com/ownerjournal/ownerjournal/owner"
	"github.com/ownerjournal/ownerjournal/recover"
)

// BenchmarkOwnerCheck is owner.Check of a live process: one /proc/PID/stat.
func BenchmarkOwnerCheck(b *testing.B) {
	s, err := benchkit.StartSleeper(false)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Kill()
	b.ReportAllocs()
	for b.Loop() {
		if v := owner.Check(s.ID); v.State != owner.Alive {
			b.Fatal(v)
		}
	}
}

// BenchmarkOwnerOpen is owner.Open: ancestor check, pidfd_open, verify.
func BenchmarkOwnerOpen(b *testing.B) {
	s, err := benchkit.StartSleeper(false)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Kill()
	b.ReportAllocs()
	for b.Loop() {
		p, err := owner.Open(s.ID)
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

// BenchmarkTerminate is recover.Terminate of a process that obeys SIGTERM;
// starting the process is outside the timer.
func BenchmarkTerminate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		s, err := benchkit.StartSleeper(false)
		if err != nil {
			b.Fatal(err)
		}
		p, err := owner.Open(s.ID)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, err = recover.Terminate(context.Background(), p, false, time.Second)
		b.StopTimer()
		p.Close()
		<-s.Exited
		b.StartTimer()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExitConfirm is the time from SIGKILL (sent with kill(2), as by
// anyone else) to owner.Process.Wait returning: how fast ownerjournal
// learns of a death. Starting the process is outside the timer.
func BenchmarkExitConfirm(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		s, err := benchkit.StartSleeper(false)
		if err != nil {
			b.Fatal(err)
		}
		p, err := owner.Open(s.ID)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		syscall.Kill(s.ID.PID, syscall.SIGKILL)
		err = p.Wait(context.Background())
		b.StopTimer()
		p.Close()
		<-s.Exited
		b.StartTimer()
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupAlive is one owner.GroupAlive: a sweep of every process's
// /proc/PID/stat (coalesced with concurrent callers).
func BenchmarkGroupAlive(b *testing.B) {
	s, err := benchkit.StartSleeper(true)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Kill()
	b.ReportAllocs()
	for b.Loop() {
		if alive, err := owner.GroupAlive(s.ID.PID); err != nil || !alive {
			b.Fatal(err, alive)
		}
	}
}
