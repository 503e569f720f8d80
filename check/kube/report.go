package kube

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/listwatch/listwatch/check"
)

// reportMaxItems bounds the timeline's items (beyond it, only what a violation concerns is
// drawn), reportMaxWrites the write log's rows.
const (
	reportMaxItems  = 50000
	reportMaxWrites = 5000
)

// ReportInput is what a report shows besides the history and its result; every field is optional.
type ReportInput struct {
	// Run describes the run that recorded the history; nil: the history's own (History.Run).
	Run *check.Run
	// Findings are what the verdict rests on besides the violations.
	Findings []string
}

// WriteReport writes a self-contained HTML page of a checked history (check.WriteReport): the
// verdict, the run and every violation first, each with what was expected and received and links
// to the requests and watch frames it concerns on an interactive timeline (one row per client and
// per watch), the coverage and the write log. in may be nil.
func WriteReport(w io.Writer, h *History, res *Result, in *ReportInput) error {
	if h == nil || res == nil {
		return fmt.Errorf("kube: WriteReport needs a history and its result")
	}
	return check.WriteReport(w, BuildReport(h, res, in))
}

// BuildReport is the report WriteReport writes (in may be nil).
func BuildReport(h *History, res *Result, in *ReportInput) *check.Report {
	if in == nil {
		in = &ReportInput{}
	}
	run := in.Run
	if run == nil {
		run = h.Run
	}
	rep := &check.Report{Title: "listwatch check --kube", Word: check.Word(res.Verdict, len(res.Violations)), Verdict: res.Verdict,
		Run: run, Summary: fmt.Sprintf("%s; %d requests, %d watches", h.Resource, len(h.Operations), len(h.Watches)),
		Findings: in.Findings, Notes: res.Notes, Coverage: res.Coverage.Counts()}
	for _, v := range res.Violations {
		rep.Violations = append(rep.Violations, reportViolation(h, &v))
	}
	timelineItems(rep, h)
	rep.Sections = append(rep.Sections, writeLog(res.Writes))
	return rep
}

func opID(i int) string         { return fmt.Sprintf("op-%d", i) }
func watchID(wi int) string     { return fmt.Sprintf("w%d", wi) }
func frameID(wi, fi int) string { return fmt.Sprintf("w%d-f%d", wi, fi) }
func watchLabel(w *Watch) string {
	return fmt.Sprintf("watch %s -> %d", describeOptions(&w.Options), w.Status)
}
func frameLabel(f *Frame) string       { return describeFrame(f) }
func inRange[T any](s []T, i int) bool { return i >= 0 && i < len(s) }

func reportViolation(h *History, v *Violation) check.ReportViolation {
	rv := check.ReportViolation{Guarantee: v.Guarantee, Where: v.Where("frame", v.Frame), Message: v.Message}
	if v.Expected != "" || v.Received != "" {
		rv.Detail = fmt.Sprintf("expected: %s\nreceived: %s", v.Expected, v.Received)
	}
	if inRange(h.Watches, v.Watch) {
		w := &h.Watches[v.Watch]
		if inRange(w.Frames, v.Frame) {
			rv.Refs = append(rv.Refs, check.ReportRef{Item: frameID(v.Watch, v.Frame),
				Text: fmt.Sprintf("watch %d frame %d: %s", v.Watch, v.Frame, frameLabel(&w.Frames[v.Frame]))})
		}
		rv.Refs = append(rv.Refs, check.ReportRef{Item: watchID(v.Watch), Text: fmt.Sprintf("watch %d (client %d): %s", v.Watch, w.Client, watchLabel(w))})
	}
	if inRange(h.Operations, v.Operation) {
		op := &h.Operations[v.Operation]
		rv.Refs = append(rv.Refs, check.ReportRef{Item: opID(v.Operation), Text: fmt.Sprintf("operation %d (client %d): %s", v.Operation, op.Client, describeOperation(op))})
	}
	return rv
}

// timelineItems adds the rows (one per client, one per watch) and the items: the requests, each
// watch's call and frames. Beyond reportMaxItems only those a violation concerns are added.
func timelineItems(rep *check.Report, h *History) {
	total := len(h.Operations)
	for _, w := range h.Watches {
		total += 1 + len(w.Frames)
	}
	rep.Limit(total, reportMaxItems)
	rowOf := rep.ClientRows(len(h.Operations), func(i int) int { return h.Operations[i].Client })
	for i := range h.Operations {
		op := &h.Operations[i]
		class := "ok"
		switch {
		case op.Unknown || op.Status == 0:
			class = "unknown"
		case op.Error != nil:
			class = "failed"
		}
		rep.Add(opID(i), func() check.ReportItem {
			return check.ReportItem{Row: rowOf[op.Client], Start: op.Call, End: max(op.Return, op.Call), Class: class,
				Label: fmt.Sprintf("#%d %s", i, describeOperation(op)), Text: fullText(fmt.Sprintf("operation %d (client %d): %s", i, op.Client, describeOperation(op)), op),
				Keys: opNames(op)}
		})
	}
	for wi := range h.Watches {
		w := &h.Watches[wi]
		row := len(rep.Rows)
		rep.Rows = append(rep.Rows, check.ReportRow{Kind: "watch", Index: wi, Client: w.Client, Label: fmt.Sprintf("watch %d", wi),
			Text: fmt.Sprintf("watch %d (client %d): %s; ended at %d (%s)", wi, w.Client, watchLabel(w), w.End, w.EndReason)})
		class := "ok"
		if w.Status != 200 {
			class = "failed"
		}
		rep.Add(watchID(wi), func() check.ReportItem {
			return check.ReportItem{Row: row, Start: w.Call, End: w.Call, Class: class, Label: watchLabel(w),
				Text: fullText(fmt.Sprintf("watch %d (client %d): %s", wi, w.Client, watchLabel(w)), struct {
					Options   ListOptions `json:"options"`
					Error     *Status     `json:"error,omitempty"`
					EndReason string      `json:"endReason,omitempty"`
				}{w.Options, w.Error, w.EndReason})}
		})
		for fi := range w.Frames {
			f := &w.Frames[fi]
			class := "resp"
			switch f.Type {
			case Bookmark:
				class = "progress"
			case Error:
				class = "canceled"
			}
			rep.Add(frameID(wi, fi), func() check.ReportItem {
				var names []string
				if f.Object != nil && f.Object.Name != "" {
					names = []string{f.Object.Name}
				}
				return check.ReportItem{Row: row, Start: f.Time, End: f.Time, Class: class,
					Label: fmt.Sprintf("f%d %s", fi, frameLabel(f)), Text: fullText(fmt.Sprintf("watch %d frame %d: %s", wi, fi, frameLabel(f)), f), Keys: names}
			})
		}
	}
}

// fullText is a description followed by the JSON of what it describes: every name, label and
// annotation.
func fullText(desc string, v any) string {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		js = []byte(err.Error())
	}
	return desc + "\n\n" + string(js)
}

// opNames are the object names an operation names: in its request and in a list's answer.
func opNames(op *Operation) []string {
	var names []string
	if op.Name != "" {
		names = append(names, op.Name)
	}
	if op.List != nil {
		for _, o := range op.List.Items {
			names = append(names, o.Name)
		}
	}
	return names
}

func writeLog(writes []WriteRecord) check.ReportSection {
	s := check.ReportSection{ID: "writes", Title: "Write log", Header: []string{"resourceVersion", "operation", "object", "before", "after"}}
	for i, r := range writes {
		if i == reportMaxWrites {
			s.More = len(writes) - i
			break
		}
		rv := fmt.Sprint(r.RV)
		if r.RV == 0 {
			rv = fmt.Sprintf("%d..%d", r.MinRV, r.MaxRV)
		}
		s.Rows = append(s.Rows, []string{rv, fmt.Sprint(r.Operation), r.Name, r.Before.String(), r.After.String()})
	}
	return s
}
