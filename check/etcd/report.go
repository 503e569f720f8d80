package etcd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/listwatch/listwatch/check"
)

// Report limits: beyond them the timeline holds only what a violation concerns, and the lists are cut.
const (
	reportMaxItems     = 50000
	reportMaxEvents    = 2000
	reportMaxPorcupine = 5000
	reportEventsShown  = 12
	// reportPorcupineTimeout bounds the search run for the visualisation of a history the sweep
	// linearized (porcupine did not search it).
	reportPorcupineTimeout = 10 * time.Second
)

// ReportInput is what a report shows besides the history and its result; every field is optional.
type ReportInput struct {
	// Run describes the run that recorded the history; nil: the history's own (History.Run).
	Run *check.Run
	// Labels are the known-bug labels of the result's violations, in their order (Classify); nil:
	// classified against the store and version the run names.
	Labels []Label
	// Scenarios are the scenario suite's results.
	Scenarios []check.ReportScenario
	// Coverage is the coverage table; nil: the result's (Coverage.Counts).
	Coverage []check.Count
	// Findings are what the verdict rests on besides the violations; nil: the known bugs the labels
	// name.
	Findings []string
}

// WriteReport writes a self-contained HTML page about a checked history (check.WriteReport): the
// verdict, the run and every violation first, each with links to the operations and watch responses
// it concerns on an interactive timeline (one row per client and per watch), the scenario results,
// the coverage, the reference event log and porcupine's visualisation of the linearizability
// search. in may be nil.
func WriteReport(w io.Writer, h *History, r *Result, in *ReportInput) error {
	if h == nil || r == nil {
		return fmt.Errorf("etcd: WriteReport needs a history and its result")
	}
	rep := BuildReport(h, r, in)
	if !r.hasInfo && r.visualize != nil && len(h.Operations) <= reportMaxPorcupine {
		r.info, r.hasInfo = r.visualize(reportPorcupineTimeout)
	}
	if r.hasInfo && len(h.Operations) <= reportMaxPorcupine {
		var buf bytes.Buffer
		if err := porcupine.Visualize(r.model, r.info, &buf); err != nil {
			return fmt.Errorf("etcd: porcupine visualisation: %w", err)
		}
		rep.Extra = template.HTML(`<section id="porcupine"><h2>Linearizability search (porcupine)</h2><details><summary>porcupine's visualisation</summary><iframe title="porcupine" style="width:100%;height:800px" srcdoc="` +
			html.EscapeString(buf.String()) + `"></iframe></details></section>`)
	}
	return check.WriteReport(w, rep)
}

// BuildReport is the report WriteReport writes (in may be nil), without porcupine's visualisation.
func BuildReport(h *History, r *Result, in *ReportInput) *check.Report {
	if in == nil {
		in = &ReportInput{}
	}
	run := in.Run
	if run == nil {
		run = h.Run
	}
	labels := in.Labels
	if len(labels) != len(r.Violations) {
		var t Target
		if run != nil {
			t = Target{Product: run.Store, Version: run.Version}
		}
		labels = Classify(h, r, t)
	}
	rep := &check.Report{Title: "listwatch check", Word: check.Word(r.Verdict, len(r.Violations)), Verdict: r.Verdict, Run: run,
		Summary:  fmt.Sprintf("%d operations, %d watches, %d events in the reference log", len(h.Operations), len(h.Watches), len(r.Events)),
		Findings: in.Findings, Notes: r.Notes, Scenarios: in.Scenarios, Coverage: in.Coverage}
	if rep.Coverage == nil {
		rep.Coverage = r.Coverage.Counts(0)
	}
	if rep.Findings == nil {
		rep.Findings = bugFindings(labels)
	}
	writers := writersByRevision(h)
	for i := range r.Violations {
		rep.Violations = append(rep.Violations, reportViolation(h, &r.Violations[i], labels[i], writers))
	}
	timelineItems(rep, h)
	rep.Sections = append(rep.Sections, eventLog(r.Events))
	return rep
}

func bugFindings(labels []Label) []string {
	var out []string
	seen := map[*KnownBug]bool{}
	for _, l := range labels {
		if l.Bug != nil && !seen[l.Bug] {
			seen[l.Bug] = true
			word := "known upstream bug: "
			if l.Regression {
				word = "regression (the version has the fix of): "
			}
			out = append(out, word+l.Bug.Reference())
		}
	}
	return out
}

// labelWord is the label's text, as the command line prints it.
func labelWord(l Label) string {
	switch {
	case l.Known():
		return "known: " + l.Bug.Trackers[0]
	case l.Bug != nil:
		return "unexplained: the signature of " + l.Bug.Trackers[0] + ", fixed in " + l.Bug.FixedIn
	}
	return "unexplained"
}

// writersByRevision maps each revision a write of the history made (its answer's header revision)
// to the write, so that an event links to the request that made it.
func writersByRevision(h *History) map[int64]int {
	out := map[int64]int{}
	for i := range h.Operations {
		op := &h.Operations[i]
		if op.Response == nil || !writes(op) {
			continue
		}
		if _, ok := out[op.Response.Revision]; !ok {
			out[op.Response.Revision] = i
		}
	}
	return out
}

// writes reports whether a successful operation made a revision.
func writes(op *Operation) bool {
	r, resp := &op.Request, op.Response
	switch {
	case r.Put != nil:
		return true
	case r.DeleteRange != nil:
		return resp.DeleteRange != nil && resp.DeleteRange.Deleted > 0
	case r.Txn != nil:
		branch := r.Txn.Failure
		if resp.Txn != nil && resp.Txn.Succeeded {
			branch = r.Txn.Success
		}
		for _, o := range branch {
			if o.Put != nil || o.DeleteRange != nil || o.Txn != nil {
				return true
			}
		}
	}
	return false
}

func opID(i int) string        { return fmt.Sprintf("op-%d", i) }
func respID(wi, ri int) string { return fmt.Sprintf("w%d-r%d", wi, ri) }
func opLabel(op *Operation) string {
	return DescribeRequest(&op.Request) + " → " + DescribeOutcome(op)
}

// reportViolation is v with links to what it concerns: its operation, its watch response (the
// watch's last when about the whole watch), and the writes that made its events.
func reportViolation(h *History, v *Violation, l Label, writers map[int64]int) check.ReportViolation {
	rv := check.ReportViolation{Guarantee: v.Guarantee, Where: v.Where("response", v.Response), Message: v.Message,
		Label: labelWord(l), Known: l.Known(), Detail: v.Diff}
	if v.Revision != 0 {
		rv.Where += fmt.Sprintf(" (revision %d)", v.Revision)
	}
	seen := map[string]bool{}
	ref := func(id, text string) {
		if !seen[id] {
			seen[id] = true
			rv.Refs = append(rv.Refs, check.ReportRef{Item: id, Text: text})
		}
	}
	if v.Watch >= 0 && v.Watch < len(h.Watches) {
		w := &h.Watches[v.Watch]
		ri := v.Response
		if ri < 0 || ri >= len(w.Responses) {
			ri = len(w.Responses) - 1
		}
		if ri >= 0 {
			ref(respID(v.Watch, ri), fmt.Sprintf("watch %d response %d: %s", v.Watch, ri, describeWatchResponse(&w.Responses[ri], short, reportEventsShown)))
		}
	}
	if v.Operation >= 0 && v.Operation < len(h.Operations) {
		ref(opID(v.Operation), fmt.Sprintf("operation %d (client %d): %s", v.Operation, h.Operations[v.Operation].Client, opLabel(&h.Operations[v.Operation])))
		for _, oi := range concurrent(h, v.Operation) {
			ref(opID(oi), fmt.Sprintf("concurrent operation %d (client %d) on the same keys: %s", oi, h.Operations[oi].Client, opLabel(&h.Operations[oi])))
		}
	}
	for i := range v.Events {
		ev := &v.Events[i]
		rv.Events = append(rv.Events, describeEventQ(ev, full))
		if oi, ok := writers[ev.Kv.ModRevision]; ok {
			ref(opID(oi), fmt.Sprintf("operation %d (client %d) made revision %d: %s", oi, h.Operations[oi].Client, ev.Kv.ModRevision, opLabel(&h.Operations[oi])))
		}
	}
	return rv
}

// reportConcurrent bounds the concurrent operations a violation about an operation links to.
const reportConcurrent = 10

// concurrent lists the operations that overlap operation oi in time and name one of its keys: the
// ones a linearization orders it against.
func concurrent(h *History, oi int) []int {
	op := &h.Operations[oi]
	keys := map[string]bool{}
	for _, k := range opKeys(op) {
		keys[k] = true
	}
	var out []int
	for j := range h.Operations {
		o := &h.Operations[j]
		if j == oi || o.Call > op.Return || o.Return < op.Call {
			continue
		}
		for _, k := range opKeys(o) {
			if keys[k] {
				out = append(out, j)
				break
			}
		}
		if len(out) == reportConcurrent {
			break
		}
	}
	return out
}

// timelineItems adds the rows and items: one row per client, one per watch. Beyond reportMaxItems
// only those a violation concerns are added.
func timelineItems(rep *check.Report, h *History) {
	total := len(h.Operations)
	for _, w := range h.Watches {
		total += len(w.Responses)
	}
	rep.Limit(total, reportMaxItems)
	rowOf := rep.ClientRows(len(h.Operations), func(i int) int { return h.Operations[i].Client })
	for i := range h.Operations {
		op := &h.Operations[i]
		class := "ok"
		switch {
		case op.Unknown:
			class = "unknown"
		case op.Error != "":
			class = "failed"
		}
		rep.Add(opID(i), func() check.ReportItem {
			return check.ReportItem{Row: rowOf[op.Client], Start: op.Call, End: max(op.Return, op.Call), Class: class,
				Label: fmt.Sprintf("#%d %s", i, opLabel(op)), Text: opText(i, op), Keys: opKeys(op)}
		})
	}
	for wi := range h.Watches {
		w := &h.Watches[wi]
		row := len(rep.Rows)
		req := describeWatchRequest(&w.Request, full)
		rep.Rows = append(rep.Rows, check.ReportRow{Kind: "watch", Index: wi, Client: w.Client,
			Label: fmt.Sprintf("watch %d %s", wi, describeRange(w.Request.Key, w.Request.RangeEnd)), Text: fmt.Sprintf("watch %d (client %d): %s", wi, w.Client, req)})
		for ri := range w.Responses {
			r := &w.Responses[ri]
			class := "resp"
			switch {
			case r.Canceled || r.IsCompacted():
				class = "canceled"
			case len(r.Events) == 0:
				class = "progress"
			}
			rep.Add(respID(wi, ri), func() check.ReportItem {
				keys := []string{string(w.Request.Key)}
				for _, ev := range r.Events {
					keys = append(keys, string(ev.Kv.Key))
				}
				return check.ReportItem{Row: row, Start: r.Time, End: r.Time, Class: class,
					Label: fmt.Sprintf("w%d r%d %s", wi, ri, describeWatchResponse(r, short, reportEventsShown)),
					Text:  fmt.Sprintf("watch %d response %d (watch %s):\n%s", wi, ri, req, describeWatchResponse(r, full, -1)), Keys: keys}
			})
		}
	}
}

// opText is an operation in full: its description with whole keys and values, and its JSON.
func opText(i int, op *Operation) string {
	js, err := json.MarshalIndent(op, "", "  ")
	if err != nil {
		js = []byte(err.Error())
	}
	return fmt.Sprintf("operation %d (client %d): %s → %s\n\n%s", i, op.Client, describeRequest(&op.Request, full), DescribeOutcome(op), js)
}

// opKeys are the keys an operation names: in its request, and in a range's answer.
func opKeys(op *Operation) []string {
	var keys []string
	var req func(r *Request)
	reqOp := func(o *RequestOp) { req(&Request{Range: o.Range, Put: o.Put, DeleteRange: o.DeleteRange, Txn: o.Txn}) }
	req = func(r *Request) {
		switch {
		case r.Range != nil:
			keys = append(keys, string(r.Range.Key))
		case r.Put != nil:
			keys = append(keys, string(r.Put.Key))
		case r.DeleteRange != nil:
			keys = append(keys, string(r.DeleteRange.Key))
		case r.Txn != nil:
			for _, c := range r.Txn.Compare {
				keys = append(keys, string(c.Key))
			}
			for i := range r.Txn.Success {
				reqOp(&r.Txn.Success[i])
			}
			for i := range r.Txn.Failure {
				reqOp(&r.Txn.Failure[i])
			}
		}
	}
	req(&op.Request)
	if op.Response != nil && op.Response.Range != nil {
		for _, kv := range op.Response.Range.Kvs {
			keys = append(keys, string(kv.Key))
		}
	}
	return keys
}

func describeWatchRequest(req *WatchRequest, q func(Bytes) string) string {
	desc := describeRangeQ(req.Key, req.RangeEnd, q)
	if req.StartRevision != 0 {
		desc += fmt.Sprintf(" from %d", req.StartRevision)
	}
	if req.PrevKV {
		desc += " prev_kv"
	}
	if req.ProgressNotify {
		desc += " progress_notify"
	}
	if len(req.Filters) > 0 {
		desc += fmt.Sprintf(" filters %v", req.Filters)
	}
	return desc
}

// describeWatchResponse describes r, its keys and values quoted by q, at most shown events (-1: all,
// one a line).
func describeWatchResponse(r *WatchResponse, q func(Bytes) string, shown int) string {
	switch {
	case r.Created && r.Canceled:
		return fmt.Sprintf("created and canceled at %d: %s", r.Revision, r.CancelReason)
	case r.Created:
		return fmt.Sprintf("created at %d", r.Revision)
	case r.IsCompacted():
		return fmt.Sprintf("compacted at %d", r.CompactRevision)
	case r.Canceled:
		return fmt.Sprintf("canceled at %d: %s", r.Revision, r.CancelReason)
	case r.IsProgressNotify():
		return fmt.Sprintf("progress at %d", r.Revision)
	}
	parts := make([]string, 0, len(r.Events))
	for i := range r.Events {
		if i == shown {
			parts = append(parts, fmt.Sprintf("… %d more", len(r.Events)-i))
			break
		}
		parts = append(parts, describeEventQ(&r.Events[i], q))
	}
	if shown < 0 {
		return fmt.Sprintf("header %d, %d events:\n  %s", r.Revision, len(r.Events), strings.Join(parts, "\n  "))
	}
	return fmt.Sprintf("header %d: %s", r.Revision, strings.Join(parts, "; "))
}

func describeEventQ(ev *Event, q func(Bytes) string) string {
	s := fmt.Sprintf("%d %s %s", ev.Kv.ModRevision, ev.Type, q(ev.Kv.Key))
	if ev.Type == Put {
		s += fmt.Sprintf("=%s (create %d, version %d", q(ev.Kv.Value), ev.Kv.CreateRevision, ev.Kv.Version)
		if ev.Kv.Lease != 0 {
			s += fmt.Sprintf(", lease %d", ev.Kv.Lease)
		}
		s += ")"
	}
	if ev.PrevKV != nil {
		s += fmt.Sprintf(" prev %s@%d", q(ev.PrevKV.Value), ev.PrevKV.ModRevision)
	}
	return s
}

// eventLog is the reference event log as a table, keys and values whole.
func eventLog(events []Event) check.ReportSection {
	s := check.ReportSection{ID: "events", Title: "Reference event log", Header: []string{"revision", "type", "key", "value", "create", "version", "lease", "prev"}}
	for i := range events {
		if i == reportMaxEvents {
			s.More = len(events) - i
			break
		}
		ev := &events[i]
		prev := ""
		if ev.PrevKV != nil {
			prev = fmt.Sprintf("%s@%d", full(ev.PrevKV.Value), ev.PrevKV.ModRevision)
		}
		s.Rows = append(s.Rows, []string{itoa64(ev.Kv.ModRevision), ev.Type.String(), full(ev.Kv.Key), full(ev.Kv.Value),
			itoa64(ev.Kv.CreateRevision), itoa64(ev.Kv.Version), itoa64(ev.Kv.Lease), prev})
	}
	return s
}
