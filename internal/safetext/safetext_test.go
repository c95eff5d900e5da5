package safetext

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQuote(t *testing.T) {
	for _, tt := range []struct {
		in   string
		safe bool
	}{
		{"", true},
		{"e2e tmux 3", true},
		{"scratch/w3", true},
		{"bad\uFFFD", true},
		{"héllo wörld ☃", true},
		{"\x1b[2J", false},
		{"a\nrecover (all) /r: 0 orphan; root removed", false},
		{"tab\there", false},
		{"cr\r", false},
		{"del\x7f", false},
		{"c1\u0085", false},
		{"bad\xff", false},
		{"bidi\u202egnp.exe", false},
		{"nbsp\u00a0", false},
		{`"quoted"`, false},
		{`in"side`, true},
	} {
		got := Quote(tt.in)
		assert.Equal(t, tt.safe, Safe(tt.in), "%q", tt.in)
		if tt.safe {
			assert.Equal(t, tt.in, got)
			continue
		}
		assert.Equal(t, strconv.Quote(tt.in), got)
		for i := 0; i < len(got); i++ {
			assert.False(t, got[i] < 0x20 || got[i] == 0x7f, "raw control byte in %q", got)
		}
		back, err := strconv.Unquote(got)
		assert.NoError(t, err)
		assert.Equal(t, tt.in, back, "quoting loses nothing")
	}
}

func FuzzQuote(f *testing.F) {
	f.Add("\x1b[2J\nrecover (all) x: root removed")
	f.Add("bad\xff")
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		for i := 0; i < len(q); i++ {
			if q[i] < 0x20 || q[i] == 0x7f {
				t.Fatalf("raw control byte in %q", q)
			}
		}
		if q != s {
			back, err := strconv.Unquote(q)
			if err != nil || back != s {
				t.Fatalf("Quote(%q) = %q does not unquote to it", s, q)
			}
		}
	})
}
