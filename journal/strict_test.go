package journal

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStrictSeeds decodes the fuzz seeds of issue 12 (identities with a
// field missing, pgid 1, text that is not valid UTF-8 or holds control
// characters): each is corrupt for the reason its name says, and the one
// that names a file with a real U+FFFD is valid. The seeds stay in the
// corpus of both decoder fuzz targets.
func TestStrictSeeds(t *testing.T) {
	want := map[string]string{
		"owner-start-time-0":         "owner identity: start_time is missing",
		"owner-no-boot-id":           "owner identity: boot_id is missing",
		"owner-empty-host":           "owner identity: host is missing",
		"subject-no-start-time":      "subject identity: start_time is missing",
		"subject-empty-boot-id":      "subject identity: boot_id is missing",
		"subject-no-host":            "subject identity: host is missing",
		"pgid-1":                     "pgid 1",
		"path-invalid-utf8":          `paths: string "bad\xff": invalid UTF-8`,
		"path-lone-surrogate":        "paths: string \"bad\\\\ud800\": lone surrogate",
		"socket-lone-low-surrogate":  "sockets: string",
		"label-escape-sequence":      "control character U+001B",
		"label-c1-control":           "control character U+0085",
		"boot-id-control":            "subject identity: boot_id",
		"path-real-replacement-char": "",
	}
	for _, target := range []string{"FuzzDecode", "FuzzDecodeFast"} {
		for name, reason := range want {
			t.Run(target+"/"+name, func(t *testing.T) {
				b, err := os.ReadFile(filepath.Join("testdata", "fuzz", target, name))
				require.NoError(t, err)
				lines := strings.SplitN(string(b), "\n", 3)
				require.Len(t, lines, 3)
				lit, ok := strings.CutPrefix(lines[1], "[]byte(")
				require.True(t, ok)
				in, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
				require.NoError(t, err)
				rec, err := Decode([]byte(in))
				if reason == "" {
					require.NoError(t, err)
					assert.Equal(t, "bad\uFFFD", rec.Paths[0])
					return
				}
				require.Error(t, err)
				assert.Nil(t, rec)
				assert.Contains(t, err.Error(), reason)
			})
		}
	}
}
