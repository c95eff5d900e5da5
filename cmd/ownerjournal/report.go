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

// rootKeptText shortens why a root was kept: RemoveRoot's error already
// counts each kind of entry and names at most a few of each ("journal:
// keeping R: 1,200 records, e.g. a, b, c: root in use"); the root is said
// once on the summary line, so only the list is shown.
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
	return "in use: " + list + " (ownerjournal status lists them)"
}
