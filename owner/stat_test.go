package owner

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// statLine formats a /proc/PID/stat line as Linux 6.x prints it (52 fields),
// with the given command name, state, ppid, pgrp and start time (field 22).
func statLine(pid int, comm string, state byte, ppid, pgid int, start uint64) string {
	return fmt.Sprintf("%d (%s) %c %d %d %d 34816 %d 4194560 107 0 0 0 1 0 0 0 20 0 1 0 %d 2502656 221 18446744073709551615 "+
		"94850409164800 94850409181137 140724937315456 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94850409195888 94850409197504 "+
		"94850438983680 140724937319237 140724937319253 140724937319253 140724937322474 0\n",
		pid, comm, state, ppid, pgid, pgid, pgid, start)
}

func TestParseStat(t *testing.T) {
	full := statLine(4242, "sleep", 'S', 1, 4242, 987654321)
	tests := []struct {
		name string
		in   string
		want statFields
		err  bool
	}{
		{name: "plain", in: full, want: statFields{'S', 1, 4242, 987654321}},
		{name: "comm with spaces", in: statLine(7, "tmux: server", 'S', 1, 7, 55), want: statFields{'S', 1, 7, 55}},
		{name: "comm with ) (", in: statLine(7, "x) (y", 'R', 3, 9, 11), want: statFields{'R', 3, 9, 11}},
		{
			// A command name that forges a whole stat tail: fields are
			// counted after the last ')', which is the real one.
			name: "comm forging fields",
			in:   statLine(7, "a) Z 1 1 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 (b", 'S', 2, 3, 44),
			want: statFields{'S', 2, 3, 44},
		},
		{name: "comm ends with )", in: statLine(7, "a)", 'S', 2, 3, 44), want: statFields{'S', 2, 3, 44}},
		{name: "empty comm", in: statLine(7, "", 'S', 2, 3, 44), want: statFields{'S', 2, 3, 44}},
		{name: "comm with newline", in: statLine(7, "a\nb", 'S', 2, 3, 44), want: statFields{'S', 2, 3, 44}},
		{name: "kernel thread", in: statLine(12, "kworker/0:1-events", 'I', 2, 0, 3), want: statFields{'I', 2, 0, 3}},
		{name: "zombie", in: statLine(12, "sh", 'Z', 1, 12, 3), want: statFields{'Z', 1, 12, 3}},
		{name: "max start time", in: statLine(12, "sh", 'S', 1, 12, 1<<64-1), want: statFields{'S', 1, 12, 1<<64 - 1}},
		{name: "no trailing newline", in: strings.TrimSuffix(full, "\n"), want: statFields{'S', 1, 4242, 987654321}},
		// Only fields up to 22 are needed: a line cut after the start time
		// still parses.
		{name: "cut after field 22", in: full[:strings.Index(full, "987654321")+len("987654321")] + " ", want: statFields{'S', 1, 4242, 987654321}},

		{name: "empty", in: "", err: true},
		{name: "no parens", in: "4242 sleep S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", err: true},
		{name: "no (", in: "4242 sleep) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", err: true},
		{name: "no )", in: "4242 (sleep S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", err: true},
		{name: ") before (", in: "4242 ) S 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 (", err: true},
		{name: "ends at )", in: "4242 (sleep)", err: true},
		{name: "ends after ) and a space", in: "4242 (sleep) ", err: true},
		{name: "truncated after state", in: "4242 (sleep) S", err: true},
		{name: "truncated after field 21", in: full[:strings.Index(full, " 987654321")], err: true},
		{name: "truncated in the name", in: full[:8], err: true},
		{name: "two-byte state", in: strings.Replace(full, ") S ", ") SS ", 1), err: true},
		{name: "non-numeric ppid", in: strings.Replace(full, ") S 1 ", ") S x ", 1), err: true},
		{name: "non-numeric pgrp", in: strings.Replace(full, ") S 1 4242 ", ") S 1 y ", 1), err: true},
		{name: "negative start time", in: strings.Replace(full, " 987654321 ", " -987654321 ", 1), err: true},
		{name: "overflowing start time", in: strings.Replace(full, " 987654321 ", " 18446744073709551616 ", 1), err: true},
		{name: "NUL bytes", in: "\x00\x00\x00", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			if tt.err {
				require.ErrorIs(t, err, errStatFormat)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// FuzzParseStat feeds arbitrary bytes to the parser: it must never panic,
// and whatever it accepts has a one-byte state and the start time read
// after the last ')'.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte(statLine(1, "init", 'S', 0, 1, 2)))
	f.Add([]byte(statLine(7, "x) (y", 'R', 3, 9, 11)))
	f.Add([]byte("1 (a) S"))
	f.Add([]byte(")("))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseStat(b)
		if err != nil {
			require.ErrorIs(t, err, errStatFormat)
			return
		}
		i := bytes.LastIndexByte(b, ')')
		require.GreaterOrEqual(t, i, 0)
		rest := bytes.Fields(b[i+1:])
		require.GreaterOrEqual(t, len(rest), 20)
		require.Equal(t, []byte{got.state}, rest[0])
		start, perr := strconv.ParseUint(string(rest[19]), 10, 64)
		require.NoError(t, perr)
		require.Equal(t, start, got.startTime)
	})
}

// FuzzParseStatComm checks the round trip for any command name: the kernel
// prints the name verbatim, so whatever it holds, the fields after it must
// come back unchanged.
func FuzzParseStatComm(f *testing.F) {
	f.Add("sleep", uint64(5), 3)
	f.Add(") S 1 1 1 (", uint64(1), 1)
	f.Add("a) (b", uint64(1<<63), 99)
	f.Fuzz(func(t *testing.T, comm string, start uint64, ppid int) {
		got, err := parseStat([]byte(statLine(4242, comm, 'S', ppid, 77, start)))
		require.NoError(t, err)
		require.Equal(t, statFields{'S', ppid, 77, start}, got)
	})
}
