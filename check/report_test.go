package check

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// PageData is the timeline data a report page holds, decoded.
type pageData struct {
	Rows  []ReportRow  `json:"rows"`
	Items []ReportItem `json:"items"`
}

var (
	dataRE = regexp.MustCompile(`(?s)<script type="application/json" id="report-data">(.*?)</script>`)
	hrefRE = regexp.MustCompile(`<a class="ref" href="#i-([^"]+)" data-item="([^"]+)">`)
)

func testReport() *Report {
	long := "/listwatch-check-991234567/run/key/" + strings.Repeat("x", 60) + "</script><b>"
	return &Report{Title: "listwatch check", Word: "FAIL", Verdict: VerdictLinearizable,
		Run: &Run{Schema: SchemaVersion, Target: "http://127.0.0.1:2379", Store: "etcd", Version: "3.4.23", Seed: 42,
			Workload: "etcd", Flags: []string{"--seed", "42"}, Started: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		Summary:    "2 operations, 1 watch",
		Violations: []ReportViolation{{Guarantee: "reliable", Where: "watch 0", Message: "1 event missing", Label: "known: etcd-io/etcd#15220", Known: true, Refs: []ReportRef{{Item: "w0-r1", Text: "watch 0 response 1"}, {Item: "op-1", Text: "operation 1"}}}},
		Scenarios:  []ReportScenario{{Name: "tombstone-at-compact-revision", Guarantee: "resumable", Status: "FAIL", Detail: "1 events missing"}},
		Coverage:   []Count{{"progress notifications", 3}, {"compactions", 0}},
		Rows:       []ReportRow{{Kind: "client", Index: 0, Client: 0, Label: "client 0"}, {Kind: "watch", Index: 0, Client: 1, Label: "watch 0"}},
		Items: []ReportItem{{ID: "op-0", Row: 0, Start: 1, End: 5, Class: "ok", Label: "put …", Text: "put " + long, Keys: []string{long}},
			{ID: "op-1", Row: 0, Start: 6, End: 9, Class: "ok", Label: "put b", Text: "put b"},
			{ID: "w0-r0", Row: 1, Start: 2, End: 2, Class: "resp", Label: "created"},
			{ID: "w0-r1", Row: 1, Start: 10, End: 10, Class: "progress", Label: "progress at 3"}},
	}
}

// TestWriteReport: the page names the verdict, the run (target, version, seed), the violation
// with its known-bug label, the scenarios and the coverage; every link of a violation points to
// an item of the timeline's data, which marks the items with the violations that concern them;
// the data holds full keys, and cannot close its script element.
func TestWriteReport(t *testing.T) {
	r := testReport()
	var buf bytes.Buffer
	if err := WriteReport(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`class="verdict fail"`, `<span class="word">FAIL</span>`, "http://127.0.0.1:2379", "etcd 3.4.23",
		"seed <b>42</b>", "2026-01-02 03:04:05 UTC", `id="v-0"`, "[known: etcd-io/etcd#15220]", "1 event missing",
		"tombstone-at-compact-revision", `<tr class="missing"><td>compactions</td>`, "Not exercised: compactions.", "<code>--seed 42</code>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Count(page, "</script>") != 2 {
		t.Errorf("page has %d </script>, want 2: the data closed its element", strings.Count(page, "</script>"))
	}
	m := dataRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no report data")
	}
	var d pageData
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatalf("report data: %v", err)
	}
	ids := map[string]*ReportItem{}
	for i := range d.Items {
		ids[d.Items[i].ID] = &d.Items[i]
	}
	if len(d.Items) != 4 || len(d.Rows) != 2 || !strings.Contains(ids["op-0"].Text, r.Items[0].Keys[0]) {
		t.Fatalf("data: %d items, %d rows, op-0 %+v", len(d.Items), len(d.Rows), ids["op-0"])
	}
	links := hrefRE.FindAllStringSubmatch(page, -1)
	if len(links) != 2 {
		t.Fatalf("%d violation links, want 2", len(links))
	}
	for _, l := range links {
		it := ids[l[1]]
		if l[1] != l[2] || it == nil {
			t.Errorf("link to %q (data-item %q) names no item", l[1], l[2])
			continue
		}
		if len(it.Violations) != 1 || it.Violations[0] != 0 {
			t.Errorf("item %s is marked with violations %v, want [0]", it.ID, it.Violations)
		}
	}
	if v := ids["op-0"].Violations; len(v) != 0 {
		t.Errorf("op-0 is marked with violations %v it is not in", v)
	}
}

// TestWriteReportPass: a passing report without a run says so, and lists no violation.
func TestWriteReportPass(t *testing.T) {
	r := testReport()
	r.Word, r.Run, r.Violations = "PASS", nil, nil
	var buf bytes.Buffer
	if err := WriteReport(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`class="verdict pass"`, "No run metadata", "Violations (0)"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, `class="violation`) || strings.Contains(page, `class="ref"`) {
		t.Error("a passing report lists a violation")
	}
}

// TestReportLimit: over its limit a report adds only the items a violation names, counting the
// others as cut without building them; at its limit it adds every item. ClientRows adds one row per
// client, in number order.
func TestReportLimit(t *testing.T) {
	r := &Report{Violations: []ReportViolation{{Refs: []ReportRef{{Item: "b"}}}}}
	built := 0
	item := func() ReportItem { built++; return ReportItem{Class: "ok"} }
	r.Limit(3, 2)
	r.Add("a", item)
	r.Add("b", item)
	r.Add("c", item)
	if len(r.Items) != 1 || r.Items[0].ID != "b" || r.Cut != 2 || built != 1 {
		t.Errorf("over the limit: items %+v, cut %d, built %d; want b alone, 2 cut, 1 built", r.Items, r.Cut, built)
	}
	r.Items, r.Cut = nil, 0
	r.Limit(2, 2)
	r.Add("a", item)
	r.Add("c", item)
	if len(r.Items) != 2 || r.Cut != 0 {
		t.Errorf("at the limit: items %+v, cut %d; want both", r.Items, r.Cut)
	}
	clients := []int{3, 1, 3}
	rows := r.ClientRows(len(clients), func(i int) int { return clients[i] })
	if len(r.Rows) != 2 || r.Rows[0].Label != "client 1" || r.Rows[1].Label != "client 3" || rows[1] != 0 || rows[3] != 1 {
		t.Errorf("client rows %+v, map %v", r.Rows, rows)
	}
}
