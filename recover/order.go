package recover

import (
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// The one order in which records are listed, by status and recover alike:
// by the id in the record's file name compared field by field as numbers
// (writer pid, writer start time, sequence), so that records of one writer
// stay together; names that are not ids (corrupt entries) come last, by
// name.

// orderKey splits a record file path into its numeric id fields; ok is
// false for a name that is not "<pid>-<start>-<hex>.json".
func orderKey(path string) (k [3]uint64, ok bool) {
	id, found := strings.CutSuffix(filepath.Base(path), ".json")
	parts := strings.Split(id, "-")
	if !found || len(parts) != 3 {
		return k, false
	}
	for i, base := range []int{10, 10, 16} {
		v, err := strconv.ParseUint(parts[i], base, 64)
		if err != nil {
			return k, false
		}
		k[i] = v
	}
	return k, true
}

// pathLess is the order of two record file paths.
func pathLess(a, b string) bool {
	ka, oka := orderKey(a)
	kb, okb := orderKey(b)
	switch {
	case oka && okb && ka != kb:
		for i := range ka {
			if ka[i] != kb[i] {
				return ka[i] < kb[i]
			}
		}
	case oka != okb:
		return oka
	}
	return a < b
}

// SortEntries puts entries in the listing order shared by status and the
// recovery report.
func SortEntries(es []Entry) {
	sort.SliceStable(es, func(i, j int) bool { return pathLess(es[i].Path, es[j].Path) })
}

// sortActions puts a report's actions in the same order.
func sortActions(as []Action) {
	sort.SliceStable(as, func(i, j int) bool { return pathLess(as[i].Path, as[j].Path) })
}
