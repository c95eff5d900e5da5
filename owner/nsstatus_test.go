package owner

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const statusSample = "Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t2505\nNgid:\t0\nPid:\t2505\nPPid:\t2504\n" +
	"NStgid:\t2505\t1\nNSpid:\t2505\t1\nNSpgid:\t2504\t1\nNSsid:\t23292\t0\nVmPeak:\t   8192 kB\n"

func TestParseNSStatus(t *testing.T) {
	st, ok := parseNSStatus([]byte(statusSample))
	require.True(t, ok)
	assert.Equal(t, byte('S'), st.state)
	assert.Equal(t, []int{2505, 1}, st.nspid)
	assert.Equal(t, []int{2504, 1}, st.nspgid)
	assert.Equal(t, 1, at(st.nspid, 1))
	assert.Equal(t, -1, at(st.nspid, 2))
	assert.Equal(t, -1, at(st.nspid, -1))
	zombie, ok := parseNSStatus([]byte("State:\tZ (zombie)\nNSpid:\t7\n"))
	require.True(t, ok)
	assert.True(t, zombie.zombie())

	for _, bad := range []string{
		"",
		"State:\tS (sleeping)\n",      // no NSpid (kernel before 4.1)
		"NSpid:\t1\n",                 // no State
		"State:\t\nNSpid:\t1\n",       // empty state
		"State:\tS\nNSpid:\t1\tx\n",   // not a number
		"State:\tS\nNSpid:\t-1\n",     // negative
		"State:\tSS\nNSpid:\t1\n",     // state of two letters
		"State:\tS\nNSpgid:\t1\tzz\n", // bad NSpgid
		"State:\tS\nNSpid:\t99999999999999999999\n",
	} {
		_, ok := parseNSStatus([]byte(bad))
		assert.False(t, ok, "%q", bad)
	}
}

func TestParseNSLink(t *testing.T) {
	n, ok := parseNSLink([]byte("pid:[4026531836]"))
	require.True(t, ok)
	assert.Equal(t, uint64(0xEFFFFFFC), n)
	for _, bad := range []string{"", "pid:[]", "pid:[0]", "net:[4026531836]", "pid:[4026531836", "pid:[-1]", "pid:[1]x"} {
		_, ok := parseNSLink([]byte(bad))
		assert.False(t, ok, "%q", bad)
	}
}

// FuzzParseNSStatus: never panics, and what it accepts has a state and at
// least one PID, none negative.
func FuzzParseNSStatus(f *testing.F) {
	f.Add([]byte(statusSample))
	f.Add([]byte("State:\tZ (zombie)\nNSpid:\t7\n"))
	f.Add([]byte("State:\tS\nNSpid:\t1\t\t2\nNSpgid:\n"))
	f.Add([]byte("NSpid:1\nState:R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, ok := parseNSStatus(b)
		if !ok {
			return
		}
		require.NotZero(t, st.state)
		require.NotEmpty(t, st.nspid)
		for _, ids := range [][]int{st.nspid, st.nspgid} {
			for _, id := range ids {
				require.GreaterOrEqual(t, id, 0)
				require.True(t, bytes.Contains(b, []byte(strconv.Itoa(id))))
			}
		}
	})
}

// FuzzParseNSLink: never panics; an accepted link round-trips.
func FuzzParseNSLink(f *testing.F) {
	f.Add([]byte("pid:[4026531836]"))
	f.Add([]byte("pid:[]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, ok := parseNSLink(b)
		if ok {
			require.NotZero(t, n)
			require.Contains(t, string(b), strconv.FormatUint(n, 10))
		}
	})
}
