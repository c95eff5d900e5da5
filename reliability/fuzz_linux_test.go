package reliability

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ownerjournal/ownerjournal/journal"
	"github.com/ownerjournal/ownerjournal/owner"
)

// fuzzTarget is one fuzz test of the module.
type fuzzTarget struct {
	pkg  string // "./owner"
	name string // "FuzzParseStat"
}

var fuzzFuncRE = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)

// fuzzTargets finds every fuzz target in the module's test files, so that a
// parser's new target is fuzzed here without a change to this suite.
func fuzzTargets(t *testing.T, modRoot string) []fuzzTarget {
	t.Helper()
	var out []fuzzTarget
	err := filepath.WalkDir(modRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", ".git", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(modRoot, filepath.Dir(p))
		for _, m := range fuzzFuncRE.FindAllSubmatch(b, -1) {
			out = append(out, fuzzTarget{pkg: "./" + filepath.ToSlash(rel), name: string(m[1])})
		}
		return nil
	})
	require.NoError(t, err)
	sort.Slice(out, func(i, j int) bool { return out[i].pkg+out[i].name < out[j].pkg+out[j].name })
	return out
}

// testFuzz runs every fuzz target for -fuzztime (go test -fuzz keeps what
// fails in the package's testdata/fuzz/), and the record decoder under an
// in-process mutator. P counts failing fuzz runs and decoder panics.
func testFuzz(t *testing.T, e *env) {
	targets := fuzzTargets(t, e.modRoot)
	have := map[string]bool{}
	for _, ft := range targets {
		have[ft.pkg+"."+ft.name] = true
	}
	// The parsers the issue names must have targets.
	for _, want := range []string{"./owner.FuzzParseStat", "./journal.FuzzDecode"} {
		require.True(t, have[want], "fuzz target %s is missing", want)
	}
	panics, runs := 0, 0
	if *flagFuzzTime > 0 {
		// Two targets at a time, one fuzzing worker each: every target
		// gets its full -fuzztime of wall time on the two cores.
		type result struct {
			ft   fuzzTarget
			out  string
			code int
			err  error
			took time.Duration
		}
		results := make([]result, len(targets))
		sem := make(chan struct{}, 2)
		var wg sync.WaitGroup
		for i, ft := range targets {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				t0 := time.Now()
				cmd := exec.Command("go", "test", "-run", "^$", "-fuzz", "^"+ft.name+"$", "-fuzztime", flagFuzzTime.String(), "-parallel", "1", ft.pkg)
				cmd.Dir = e.modRoot
				out, code, err := e.runFor(cmd, *flagFuzzTime+5*time.Minute)
				results[i] = result{ft, out, code, err, time.Since(t0)}
			}()
		}
		wg.Wait()
		for _, r := range results {
			require.NoError(t, r.err)
			runs++
			if r.code != 0 {
				panics++
				t.Errorf("%s %s: exit %d (the failing input is kept in %s/testdata/fuzz/%s):\n%s", r.ft.pkg, r.ft.name, r.code, r.ft.pkg, r.ft.name, lastLines(r.out, 30))
			} else {
				t.Logf("%s %s: %v, %s", r.ft.pkg, r.ft.name, r.took.Round(time.Second), fuzzStats(r.out))
			}
		}
	} else {
		t.Logf("-fuzztime 0: %d fuzz targets not fuzzed here (their seed corpora run with their packages' tests)", len(targets))
	}
	d := *flagFuzzTime
	if d <= 0 || d > 10*time.Second {
		d = time.Second
	}
	p, n := mutateDecode(t, e.modRoot, d)
	t.Logf("in-process decoder mutation: %d inputs in %v, %d panics", n, d, p)
	panics += p
	sum.add(runs+1, 0, 0, panics)
}

// fuzzStats is go test -fuzz's last progress line.
func fuzzStats(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "execs:") {
			return strings.TrimSpace(lines[i])
		}
	}
	return lastLines(out, 1)
}

// mutateDecode feeds mutations of valid records and of FuzzDecode's corpus
// to journal.Decode for d and counts panics; an input that panics is kept in
// journal/testdata/fuzz/FuzzDecode/, where FuzzDecode replays it.
func mutateDecode(t *testing.T, modRoot string, d time.Duration) (panics, n int) {
	t.Helper()
	seeds := [][]byte{}
	id := owner.Identity{PID: 4242, StartTime: 987654, BootID: "b", UID: 0, Host: "h"}
	for _, rec := range []*journal.Record{
		{Version: 1, ID: journal.NewID(id), Kind: journal.KindProcess, Label: "l", Subject: &id, PGID: id.PID, Owner: id,
			Sockets: []string{"a.sock"}, Paths: []string{"p/q"}, Phase: journal.PhaseLive},
		{Version: 1, ID: journal.NewID(id), Kind: journal.KindPath, Owner: id, Paths: []string{"x"}, Phase: journal.PhaseIntent},
		{Version: 1, ID: journal.NewID(id), Kind: journal.KindTmux, Owner: id, Sockets: []string{"t"}, Phase: journal.PhaseIntent, Cgroup: "/sys/fs/cgroup/oj-1-2"},
	} {
		b, err := rec.Encode()
		require.NoError(t, err)
		seeds = append(seeds, b)
	}
	corpus := filepath.Join(modRoot, "journal", "testdata", "fuzz", "FuzzDecode")
	ents, _ := os.ReadDir(corpus)
	for _, en := range ents {
		if b, err := os.ReadFile(filepath.Join(corpus, en.Name())); err == nil {
			if in, ok := corpusBytes(b); ok {
				seeds = append(seeds, in)
			}
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	dict := [][]byte{[]byte(`"`), []byte(`\u0000`), []byte(`{`), []byte(`}`), []byte(`[`), []byte(`]`), []byte(`,`), []byte(`:`),
		[]byte(`null`), []byte(`-1`), []byte(`1e999`), []byte(`"../x"`), []byte(`"ID"`), []byte(`"\u017fubject"`), []byte("\xff\xfe")}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		in := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		for k := 1 + rng.IntN(4); k > 0; k-- {
			in = mutate(rng, in, dict, seeds)
		}
		n++
		if msg := decodePanics(in); msg != "" {
			panics++
			h := sha256.Sum256(in)
			name := filepath.Join(corpus, "reliability-"+hex.EncodeToString(h[:8]))
			os.MkdirAll(corpus, 0o755)
			os.WriteFile(name, []byte("go test fuzz v1\n[]byte("+strconv.Quote(string(in))+")\n"), 0o644)
			t.Errorf("journal.Decode panicked (input kept in %s): %s", name, msg)
		}
	}
	return panics, n
}

func decodePanics(in []byte) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	if rec, err := journal.Decode(in); err == nil {
		if b, err := rec.Encode(); err == nil {
			if _, err := journal.Decode(b); err != nil {
				return "" // a round trip that fails is FuzzDecode's to find
			}
		}
	}
	return ""
}

// corpusBytes reads a "go test fuzz v1" file holding one []byte.
func corpusBytes(b []byte) ([]byte, bool) {
	lines := bytes.SplitN(b, []byte("\n"), 3)
	if len(lines) < 2 || !bytes.HasPrefix(lines[1], []byte("[]byte(")) {
		return nil, false
	}
	s := strings.TrimSuffix(strings.TrimPrefix(string(bytes.TrimSpace(lines[1])), "[]byte("), ")")
	u, err := strconv.Unquote(s)
	if err != nil {
		return nil, false
	}
	return []byte(u), true
}

func mutate(rng *rand.Rand, in []byte, dict, seeds [][]byte) []byte {
	if len(in) == 0 {
		return append(in, dict[rng.IntN(len(dict))]...)
	}
	i := rng.IntN(len(in))
	switch rng.IntN(6) {
	case 0: // flip a bit
		in[i] ^= 1 << rng.IntN(8)
	case 1: // delete a span
		j := i + rng.IntN(len(in)-i+1)
		in = append(in[:i], in[j:]...)
	case 2: // insert a token
		tok := dict[rng.IntN(len(dict))]
		in = append(in[:i], append(append([]byte(nil), tok...), in[i:]...)...)
	case 3: // duplicate a span
		j := i + rng.IntN(min(len(in)-i, 64)+1)
		in = append(in[:j], append(append([]byte(nil), in[i:j]...), in[j:]...)...)
	case 4: // splice another seed
		o := seeds[rng.IntN(len(seeds))]
		k := rng.IntN(len(o) + 1)
		in = append(in[:i], o[k:]...)
	case 5: // a random byte
		in[i] = byte(rng.IntN(256))
	}
	return in
}
