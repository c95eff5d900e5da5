package reliability

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ownerjournal/ownerjournal/internal/testroot"
)

// The suite's knobs. The defaults are the short form run by `go test ./...`;
// -full switches every knob that was not set explicitly to the full form of
// `make reliability`.
var (
	flagFull       = flag.Bool("full", false, "full form: -runs 50 -reuse 1000 -soak 60s -fuzztime 60s -signal-runs 100 (explicit flags win)")
	flagRuns       = flag.Int("runs", 1, "crash matrix: runs per stage")
	flagReuse      = flag.Int("reuse", 120, "PID reuse: number of records naming a live PID with a wrong identity")
	flagSoak       = flag.Duration("soak", 2*time.Second, "concurrency soak duration")
	flagFuzzTime   = flag.Duration("fuzztime", 0, "go test -fuzz time per fuzz target; 0 runs only the in-process decoder mutation")
	flagSignalRuns = flag.Int("signal-runs", 3, "signals during cleanup: number of runs")
	flagSummary    = flag.String("summary", "", "also write the closing line to this file")
)

// applyFull fills in the full form for the flags not given explicitly.
func applyFull() {
	if !*flagFull {
		return
	}
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	full := map[string]string{"runs": "50", "reuse": "1000", "soak": "60s", "fuzztime": "60s", "signal-runs": "100"}
	for name, v := range full {
		if !set[name] {
			flag.Set(name, v)
		}
	}
}

// totals are the counts of the closing line.
type totals struct {
	mu        sync.Mutex
	ran       bool
	scenarios int
	leaked    int
	wrong     int
	panics    int
	refused   int
	hostile   int
	faults    int // faults injected (faults_linux_test.go)
	falseOK   int // of which recovery claimed a clean end while something lived
}

var sum totals

func (s *totals) add(scenarios, leaked, wrong, panics int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenarios += scenarios
	s.leaked += leaked
	s.wrong += wrong
	s.panics += panics
}

func (s *totals) addHostile(refused bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenarios++
	s.hostile++
	if refused {
		s.refused++
	}
}

func (s *totals) line() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("reliability: %d scenarios, %d leaked, %d wrongly signalled, %d panics, %d/%d hostile inputs refused, %d faults injected, %d false clean",
		s.scenarios, s.leaked, s.wrong, s.panics, s.refused, s.hostile, s.faults, s.falseOK)
}

func (s *totals) bad() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaked != 0 || s.wrong != 0 || s.panics != 0 || s.refused != s.hostile || s.falseOK != 0
}

func (s *totals) addFault(falseClean bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenarios++
	s.faults++
	if falseClean {
		s.falseOK++
	}
}

// TestMain dispatches re-executed children; in the test process it becomes a
// child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER), so that what a
// SIGKILLed participant leaves re-parents here and is reaped here (PID 1 of
// this machine does not reap), and prints the closing line after the tests.
func TestMain(m *testing.M) {
	if os.Getenv("OJ_TEST_CHILD") != "" {
		testroot.Main(m, children) // exits
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "reliability: PR_SET_CHILD_SUBREAPER:", err)
		os.Exit(1)
	}
	code := m.Run()
	if sum.ran {
		line := sum.line()
		if *flagSummary != "" {
			if err := os.WriteFile(*flagSummary, []byte(line+"\n"), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "reliability:", err)
				code = 1
			}
		}
		if sum.bad() && code == 0 {
			code = 1
		}
		fmt.Println(line)
	}
	os.Exit(code)
}

// children are the re-executed helper processes, by name.
var children = map[string]func() int{
	"worker":     childWorker,
	"recoverer":  childRecoverer,
	"sigcounter": childSigCounter,
	"listener":   childListener,
	"publisher":  childPublisher,
	"soakrecov":  childSoakRecoverer,
	"guard":      childGuard,
	"rlimited":   childRlimited,
	"intenter":   childIntenter,
	"trapper":    childTrapper,
}

// TestReliability runs the whole suite and accounts for the closing line.
func TestReliability(t *testing.T) {
	applyFull()
	sum.mu.Lock()
	sum.ran = true
	sum.mu.Unlock()
	start := time.Now()
	suite := newEnv(t)
	t.Logf("runs=%d reuse=%d soak=%v fuzztime=%v signal-runs=%d", *flagRuns, *flagReuse, *flagSoak, *flagFuzzTime, *flagSignalRuns)
	parts := []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"crash", testCrashMatrix},
		{"pidreuse", testPIDReuse},
		{"hostile", testHostile},
		{"soak", testSoak},
		{"signals", testSignals},
		{"fuzz", testFuzz},
		{"faults", testFaults},
	}
	for _, p := range parts {
		t0 := time.Now()
		t.Run(p.name, func(t *testing.T) { p.fn(t, suite) })
		t.Logf("%s: %v", p.name, time.Since(t0).Round(time.Millisecond))
	}
	suite.checkBystanders(t, "end of suite")
	t.Logf("suite: %v", time.Since(start).Round(time.Millisecond))
}
