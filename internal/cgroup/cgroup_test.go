package cgroup

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const hybridMountinfo = `23 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []mount
	}{
		{"hybrid", hybridMountinfo, []mount{
			{root: "/", point: "/", fstype: "ext4"},
			{root: "/", point: "/sys/fs/cgroup", fstype: "tmpfs"},
			{root: "/", point: "/sys/fs/cgroup/cpu", fstype: "cgroup"},
			{root: "/", point: "/sys/fs/cgroup/unified", fstype: "cgroup2"},
		}},
		{"optional fields", "30 25 0:26 / /sys/fs/cgroup rw,nosuid shared:4 master:1 - cgroup2 cgroup2 rw,nsdelegate\n",
			[]mount{{root: "/", point: "/sys/fs/cgroup", fstype: "cgroup2"}}},
		{"escaped paths", `50 23 0:40 /a\040b /mnt/with\040space\134x rw - cgroup2 none rw` + "\n",
			[]mount{{root: "/a b", point: `/mnt/with space\x`, fstype: "cgroup2"}}},
		{"namespaced root", "60 23 0:40 /user.slice/x.scope /sys/fs/cgroup rw - cgroup2 cgroup2 rw",
			[]mount{{root: "/user.slice/x.scope", point: "/sys/fs/cgroup", fstype: "cgroup2"}}},
		{"no separator skipped", "1 2 3:4 / /x rw cgroup2 cgroup2 rw\n", nil},
		{"separator without fstype skipped", "1 2 3:4 / /x rw -\n", nil},
		{"short line skipped", "1 2 - cgroup2\n", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parseMountinfo([]byte(tt.in)))
		})
	}
}

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:       "plain",
		`a\040b`:      "a b",
		`tab\011`:     "tab\t",
		`nl\012x`:     "nl\nx",
		`bs\134`:      `bs\`,
		`short\04`:    `short\04`,
		`not\08octal`: `not\08octal`,
		`big\777`:     `big\777`,
		`\`:           `\`,
	} {
		assert.Equal(t, want, unescapeOctal(in), "input %q", in)
	}
}

func TestParseSelfCgroup(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		wantOK bool
	}{
		{"hybrid", "9:name=systemd:/\n4:memory:/x\n0::/\n", "/", true},
		{"pure v2", "0::/user.slice/user-1000.slice/session-2.scope\n", "/user.slice/user-1000.slice/session-2.scope", true},
		{"colon in path", "0::/a:b\n", "/a:b", true},
		{"v1 only", "4:memory:/x\n1:cpu:/\n", "", false},
		{"empty", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseSelfCgroup([]byte(tt.in))
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseEvents(t *testing.T) {
	kv, err := parseEvents([]byte("populated 1\nfrozen 0\n"))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"populated": "1", "frozen": "0"}, kv)

	for _, bad := range []string{"", "frozen 0\n", "populated\n", " 1\npopulated 0\n"} {
		_, err := parseEvents([]byte(bad))
		assert.Error(t, err, "input %q", bad)
	}
}

func TestParseProcs(t *testing.T) {
	pids, err := parseProcs([]byte("12\n7\n4194304\n"))
	require.NoError(t, err)
	assert.Equal(t, []int{12, 7, 4194304}, pids)

	pids, err = parseProcs(nil)
	require.NoError(t, err)
	assert.Empty(t, pids)

	for _, bad := range []string{"x\n", "0\n", "-1\n", "1 2\n", "99999999999999999999999\n"} {
		_, err := parseProcs([]byte(bad))
		assert.Error(t, err, "input %q", bad)
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"oj-1-abc", "a", "A_b.c-1", strings.Repeat("x", 128)} {
		assert.NoError(t, validName(ok), "name %q", ok)
	}
	for _, bad := range []string{"", ".", "..", ".hidden", "-x", "a/b", "../x", "a b", "a\n", "cgroup.procs", "cgroup.kill",
		strings.Repeat("x", 129), "é"} {
		assert.Error(t, validName(bad), "name %q", bad)
	}
	assert.NoError(t, validName(randomName()))
	assert.True(t, strings.HasPrefix(randomName(), "oj-"+strconv.Itoa(os.Getpid())+"-"))
	assert.NotEqual(t, randomName(), randomName())
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add(hybridMountinfo)
	f.Add(`50 23 0:40 /a\040b /mnt/x\134 rw - cgroup2 none rw`)
	f.Add("1 2 - cgroup2\n- - - - - - - -\n")
	f.Fuzz(func(t *testing.T, in string) {
		for _, m := range parseMountinfo([]byte(in)) {
			if m.fstype == "" || strings.ContainsAny(m.fstype, " \n") {
				t.Fatalf("bad fstype %q from %q", m.fstype, in)
			}
		}
		parseSelfCgroup([]byte(in))
	})
}

func FuzzParseEvents(f *testing.F) {
	f.Add("populated 1\nfrozen 0\n")
	f.Add("populated 0\n")
	f.Add(" \n\n")
	f.Fuzz(func(t *testing.T, in string) {
		kv, err := parseEvents([]byte(in))
		if err == nil {
			if _, ok := kv["populated"]; !ok {
				t.Fatalf("accepted %q without populated", in)
			}
		}
	})
}

func FuzzParseProcs(f *testing.F) {
	f.Add("1\n2\n3\n")
	f.Add("x")
	f.Add("\n\n-0\n")
	f.Fuzz(func(t *testing.T, in string) {
		pids, err := parseProcs([]byte(in))
		if err == nil {
			for _, p := range pids {
				if p <= 0 {
					t.Fatalf("accepted pid %d from %q", p, in)
				}
			}
		}
	})
}
