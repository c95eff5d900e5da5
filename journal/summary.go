package journal

import (
	"fmt"
	"strconv"
	"strings"
)

// summaryExamples is how many names a summary shows of one kind of entry.
const summaryExamples = 3

// leftSummary says what keeps a root, counting each kind of entry and naming
// at most [summaryExamples] of each ("7,493 records, e.g. …"), so that the
// message stays one readable line however many records a loaded root holds.
// Entries of the root that a record names are "recorded path"s: they stay
// because their record stays, not because nobody accounts for them.
func leftSummary(s *Scan, liveLeases []int) string {
	named := map[string]bool{}
	for _, rec := range s.Records {
		for _, p := range rec.Sockets {
			top, _, _ := strings.Cut(p, "/")
			named[top] = true
		}
		for _, p := range rec.Paths {
			top, _, _ := strings.Cut(p, "/")
			named[top] = true
		}
	}
	var records, corrupt, temps, leases, recorded, extra []string
	for _, rec := range s.Records {
		records = append(records, rec.ID)
	}
	for _, c := range s.Corrupt {
		corrupt = append(corrupt, c.Path)
	}
	for _, t := range s.Temps {
		temps = append(temps, t.Name)
	}
	for _, pid := range liveLeases {
		leases = append(leases, "pid "+strconv.Itoa(pid))
	}
	for _, e := range s.Extra {
		if named[e] {
			recorded = append(recorded, e)
		} else {
			extra = append(extra, e)
		}
	}
	var parts []string
	for _, g := range []struct {
		one, many string
		names     []string
	}{
		{"record", "records", records},
		{"corrupt", "corrupt records", corrupt},
		{"temp file", "temp files", temps},
		{"lease of live participant", "leases of live participants", leases},
		{"recorded path", "recorded paths", recorded},
		{"unrecorded entry", "unrecorded entries", extra},
	} {
		if p := summarize(g.one, g.many, g.names); p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, ", ")
}

// summarize lists up to summaryExamples names as "one NAME, one NAME", and
// more as "N many, e.g. NAME, NAME, NAME".
func summarize(one, many string, names []string) string {
	switch {
	case len(names) == 0:
		return ""
	case len(names) <= summaryExamples:
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = one + " " + n
		}
		return strings.Join(out, ", ")
	}
	return fmt.Sprintf("%s %s, e.g. %s", thousands(len(names)), many, strings.Join(names[:summaryExamples], ", "))
}

// thousands formats n with commas between groups of three digits (7,493).
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
