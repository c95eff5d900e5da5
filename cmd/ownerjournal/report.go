package main

import (
	"fmt"
	"strings"

	"github.com/ownerjournal/ownerjournal/recover"
)

// reportDoc is `recover --json`: the report with the schema version and the
// number of records retained (Report.Retained counts every retained item:
// records, temp files, problems, a root that could not go).
type reportDoc struct {
	Schema          int `json:"schema"`
	RetainedRecords int `json:"retained_records"`
	*recover.Report
}

func newReportDoc(rep *recover.Report) reportDoc {
	return reportDoc{Schema: jsonSchema, RetainedRecords: retainedRecords(rep), Report: rep}
}

// retainedRecords counts the records a report retained, one per record
// whatever the number of reasons.
func retainedRecords(rep *recover.Report) int {
	n := 0
	for _, a := range rep.Actions {
		if a.Retained != "" {
			n++
		}
	}
	return n
}

// retainedSummary is "2 retained" (records, one each), with the problems
// printed above counted apart; a root kept is said by "root kept".
func retainedSummary(rep *recover.Report) string {
	s := fmt.Sprintf("%d retained", retainedRecords(rep))
	if n := len(rep.Problems); n > 0 {
		s += fmt.Sprintf(" (and %d problem(s), listed above)", n)
	}
	return s
}

// rootKeptText shortens why a root was kept: RemoveRoot lists every record
// and lease it found ("journal: keeping R: record a, record b, …, lease of
// live participant pid N: root in use"); a summary says what kind and how
// many.
func rootKeptText(kept string) string {
	rest, ok := strings.CutPrefix(kept, "journal: keeping ")
	if !ok {
		return kept
	}
	_, list, ok := strings.Cut(rest, ": ")
	if !ok {
		return kept
	}
	for _, suffix := range []string{": journal: root in use", ": root in use"} {
		list = strings.TrimSuffix(list, suffix)
	}
	counts := map[string]int{}
	var order []string
	for _, item := range strings.Split(list, ", ") {
		kind := item
		switch {
		case strings.HasPrefix(item, "record "):
			kind = "record(s)"
		case strings.HasPrefix(item, "corrupt "):
			kind = "corrupt record(s)"
		case strings.HasPrefix(item, "temp file "):
			kind = "temp file(s)"
		case strings.HasPrefix(item, "lease of live participant"):
			kind = "live participant(s)"
		case strings.HasPrefix(item, "unrecorded entry "):
			kind = "unrecorded entr(ies)"
		}
		if counts[kind] == 0 {
			order = append(order, kind)
		}
		counts[kind]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return "in use: " + strings.Join(parts, ", ") + " (ownerjournal status lists them)"
}
