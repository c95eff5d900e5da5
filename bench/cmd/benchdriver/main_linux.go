package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

// figure is one measurement; it prints its own bench: lines.
type figure struct {
	name string
	fn   func(*driver) error
}

var figures = []figure{
	{"publish", (*driver).publish},
	{"publish-concurrent", (*driver).publishConcurrent},
	{"scan-10k", (*driver).scan10k},
	{"recover-10k", (*driver).recover10k},
	{"remove-deep", (*driver).removeDeep},
	{"teardown-200", (*driver).teardown200},
	{"exit-latency-ms", (*driver).exitLatency},
	{"status-empty-ms", (*driver).statusEmpty},
	{"tree-kill-ratio", (*driver).treeKill},
	{"forge-poll-ratio", (*driver).forgePoll},
	{"pw-side-by-side", (*driver).pwSideBySide},
	{"jest-overhead", (*driver).jestOverhead},
}

// driver carries the configuration and what must be cleaned up.
type driver struct {
	oj      string // ownerjournal binary
	nodeDir string // bench/node with node_modules/tree-kill
	self    string // this executable, for helpers

	// The Node figures: the e2e-server binary and the directory holding
	// the Playwright and Jest projects.
	e2eServer, testdata string

	mu       sync.Mutex
	cleanups []func()
}

func main() {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(runHelper(h, os.Args[1:]))
	}
	oj := flag.String("ownerjournal", "bin/ownerjournal", "the ownerjournal binary")
	nodeDir := flag.String("node", "bench/node", "directory holding node_modules/tree-kill and treekill.js")
	e2eServer := flag.String("e2e-server", "", "the e2e-server binary (default: beside the ownerjournal binary)")
	testdata := flag.String("testdata", "testdata", "directory holding the installed playwright and jest projects")
	run := flag.String("run", "", "run only the figures whose name matches this regexp")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the driver process (the in-process figures) to this file")
	flag.Parse()
	d, err := newDriver(*oj, *nodeDir)
	if err == nil {
		err = d.nodeFlags(*e2eServer, *testdata)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchdriver: %v\n", err)
		os.Exit(1)
	}
	var re *regexp.Regexp
	if *run != "" {
		if re, err = regexp.Compile(*run); err != nil {
			fmt.Fprintf(os.Stderr, "benchdriver: -run: %v\n", err)
			os.Exit(2)
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchdriver: %v\n", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "benchdriver: %v\n", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	failed := 0
	for _, f := range figures {
		if re != nil && !re.MatchString(f.name) {
			continue
		}
		t0 := time.Now()
		err := f.fn(d)
		d.cleanup()
		if err != nil {
			failed++
			fmt.Printf("bench: %s = FAILED (%v)\n", f.name, err)
		}
		logf("%s took %v", f.name, time.Since(t0).Round(time.Millisecond))
	}
	logf("all figures took %v", time.Since(start).Round(time.Millisecond))
	if failed > 0 {
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func newDriver(oj, nodeDir string) (*driver, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if oj, err = filepath.Abs(oj); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(oj); err != nil || fi.IsDir() {
		return nil, fmt.Errorf("ownerjournal binary %s not found: build it with `go build -o bin/ ./cmd/...`", oj)
	}
	if nodeDir, err = filepath.Abs(nodeDir); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "tree-kill", "index.js")); err != nil {
		return nil, fmt.Errorf("npm tree-kill is not installed in %s: run `npm ci` there", nodeDir)
	}
	for _, bin := range []string{"node", "ps", "strace", "sleep", "sh", "setsid"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is required and not installed: %w", bin, err)
		}
	}
	return &driver{oj: oj, nodeDir: nodeDir, self: self}, nil
}

// defer registers fn to run after the current figure, last in first out.
func (d *driver) defer_(fn func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cleanups = append(d.cleanups, fn)
}

func (d *driver) cleanup() {
	d.mu.Lock()
	fns := d.cleanups
	d.cleanups = nil
	d.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// report prints one figure line.
func report(name string, value string, detail string, a ...any) {
	line := fmt.Sprintf("bench: %s = %s", name, value)
	if detail != "" {
		line += " (" + fmt.Sprintf(detail, a...) + ")"
	}
	fmt.Println(line)
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "benchdriver: "+format+"\n", a...)
}

// ratio formats a/b with two significant decimals.
func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "NaN"
	}
	r := float64(a) / float64(b)
	switch {
	case r < 0.1:
		return fmt.Sprintf("%.4f", r)
	default:
		return fmt.Sprintf("%.3f", r)
	}
}

func ms(d time.Duration) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)), "0"), ".") + " ms"
}

func msNum(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }
