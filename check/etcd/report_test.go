package etcd

import (
	"bytes"
	"fmt"
	"html"
	"strconv"
	"strings"
	"testing"

	"github.com/listwatch/listwatch/check"
)

// itemsByID indexes a report's timeline items.
func itemsByID(rep *check.Report) map[string]*check.ReportItem {
	ids := map[string]*check.ReportItem{}
	for i := range rep.Items {
		ids[rep.Items[i].ID] = &rep.Items[i]
	}
	return ids
}

// TestReportOfFailingHistory: the report of a history with a violation names the run it was
// recorded in (target, version, seed), lists every violation with a known-bug label, and links
// each to timeline items that exist: a stale read to its operation, a dropped event to the watch
// response after it and to the write that made the event; the page holds those links and the
// porcupine visualisation.
func TestReportOfFailingHistory(t *testing.T) {
	h := scenario(t)
	res := mustCheck(t, h)
	var stale, drop mutation
	for _, m := range mutations {
		switch m.name {
		case "stale read":
			stale = m
		case "drop an event":
			drop = m
		}
	}
	run := &check.Run{Schema: check.SchemaVersion, Target: "http://127.0.0.1:2379", Store: "etcd", Version: "3.4.23", Workload: "etcd", Seed: 99}
	for _, m := range []mutation{stale, drop} {
		t.Run(m.name, func(t *testing.T) {
			mh := cloneHistory(t, h)
			m.apply(mh, res, func(int) int { return 0 })
			mh.Run = run
			mres := mustCheck(t, mh)
			rep := BuildReport(mh, mres, &ReportInput{})
			if rep.Run != run || rep.Word != "FAIL" || len(rep.Violations) != len(mres.Violations) {
				t.Fatalf("report: run %+v, word %s, %d violations (result has %d)", rep.Run, rep.Word, len(rep.Violations), len(mres.Violations))
			}
			ids := itemsByID(rep)
			for i, v := range rep.Violations {
				if v.Label == "" || len(v.Refs) == 0 {
					t.Errorf("violation %d (%s) has label %q, links %v", i, v.Message, v.Label, v.Refs)
				}
				for _, r := range v.Refs {
					if ids[r.Item] == nil {
						t.Errorf("violation %d links to %s, no item of the timeline", i, r.Item)
					}
				}
			}
			first := rep.Violations[0]
			mv := mres.Violations[0]
			switch m.want {
			case Linearizable:
				if first.Refs[0].Item != opID(mv.Operation) {
					t.Errorf("the linearizability violation links to %v, not to operation %d", first.Refs, mv.Operation)
				}
				for _, r := range first.Refs[1:] {
					var j int
					fmt.Sscanf(r.Item, "op-%d", &j)
					if o, c := &mh.Operations[j], &mh.Operations[mv.Operation]; o.Call > c.Return || o.Return < c.Call {
						t.Errorf("the linearizability violation links to %s, not concurrent with operation %d", r.Item, mv.Operation)
					}
				}
			default:
				if first.Refs[0].Item != respID(mv.Watch, mv.Response) && mv.Response >= 0 {
					t.Errorf("the watch violation links to %v, not to watch %d response %d", first.Refs, mv.Watch, mv.Response)
				}
				if len(first.Refs) < 2 || !strings.HasPrefix(first.Refs[1].Item, "op-") || len(first.Events) == 0 {
					t.Errorf("the dropped event's violation links to no write (%v) or lists no event (%v)", first.Refs, first.Events)
				}
			}
			var page bytes.Buffer
			if err := WriteReport(&page, mh, mres, nil); err != nil {
				t.Fatal(err)
			}
			p := page.String()
			for _, want := range []string{"etcd 3.4.23", "seed <b>99</b>", `id="v-0"`, `href="#i-` + first.Refs[0].Item + `"`,
				html.EscapeString(mv.Message), `<iframe title="porcupine"`} {
				if !strings.Contains(p, want) {
					t.Errorf("page lacks %q", want)
				}
			}
		})
	}
}

// TestReportFullKeys: the timeline shows a long key cut in the middle (its end, which tells keys
// apart, kept) and holds it whole, with its value, in the item's full text and its keys.
func TestReportFullKeys(t *testing.T) {
	key := "/listwatch-check-99123456/run/" + strings.Repeat("k", 50) + "/17"
	value := `{"apiVersion":"v1","kind":"ConfigMap","data":{"x":"` + strings.Repeat("y", 80) + `"}}`
	h := &History{Operations: []Operation{{Client: 0, Call: 1, Return: 2, Request: Request{Put: &PutRequest{Key: Bytes(key), Value: Bytes(value)}},
		Response: &Response{Revision: 2}}}}
	res := mustCheck(t, h)
	rep := BuildReport(h, res, nil)
	it := itemsByID(rep)["op-0"]
	if it == nil {
		t.Fatal("no item for operation 0")
	}
	if !strings.Contains(it.Label, "…") || !strings.Contains(it.Label, `/17"`) {
		t.Errorf("label %q is not cut in the middle", it.Label)
	}
	if !strings.Contains(it.Text, strconv.Quote(key)) || !strings.Contains(it.Text, strconv.Quote(value)) {
		t.Errorf("full text lacks the whole key or value:\n%s", it.Text)
	}
	if len(it.Keys) != 1 || it.Keys[0] != key {
		t.Errorf("keys %q, want the key", it.Keys)
	}
	if rep.Word != "PASS" || rep.Run != nil {
		t.Errorf("word %s, run %+v", rep.Word, rep.Run)
	}
}

func TestReportOfPassingHistory(t *testing.T) {
	h := scenario(t)
	res := mustCheck(t, h)
	var page bytes.Buffer
	if err := WriteReport(&page, h, res, &ReportInput{Scenarios: []check.ReportScenario{{Name: "progress", Guarantee: "bookmarkable", Status: "PASS"}}}); err != nil {
		t.Fatal(err)
	}
	p := page.String()
	for _, want := range []string{`class="verdict pass"`, "Violations (0)", `<tr class="scenario pass">`, "No run metadata"} {
		if !strings.Contains(p, want) {
			t.Errorf("passing report lacks %q", want)
		}
	}
	rep := BuildReport(h, res, nil)
	if len(rep.Items) != len(h.Operations)+len(h.Watches[0].Responses)+len(h.Watches[1].Responses)+len(h.Watches[2].Responses)+len(h.Watches[3].Responses) {
		t.Errorf("timeline has %d items", len(rep.Items))
	}
	if err := WriteReport(&page, nil, res, nil); err == nil {
		t.Fatal("WriteReport without a history succeeded")
	}
}

// TestReportLinksConcurrentOperations: a linearizability violation links to its operation and to
// the operations that overlap it in time on one of its keys, not to those on other keys.
func TestReportLinksConcurrentOperations(t *testing.T) {
	h := &History{Operations: []Operation{
		{Client: 0, Call: 1, Return: 10, Request: put("a", "1"), Response: &Response{Revision: 2}},
		{Client: 1, Call: 2, Return: 3, Request: get("a"), Response: &Response{Revision: 2,
			Range: &RangeResponse{Kvs: []KeyValue{{Key: "a", Value: "9", CreateRevision: 2, ModRevision: 2, Version: 1}}, Count: 1}}},
		{Client: 2, Call: 2, Return: 4, Request: put("b", "1"), Response: &Response{Revision: 3}},
	}}
	res := mustCheck(t, h)
	if len(res.Violations) != 1 || res.Violations[0].Operation != 1 {
		t.Fatalf("violations %v, want one of operation 1", res.Violations)
	}
	var links []string
	for _, r := range BuildReport(h, res, nil).Violations[0].Refs {
		links = append(links, r.Item)
	}
	if strings.Join(links, " ") != "op-1 op-0" {
		t.Errorf("the violation links to %v, want op-1 and the concurrent put of its key, op-0", links)
	}
}
