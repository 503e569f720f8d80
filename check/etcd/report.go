package etcd

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/listwatch/listwatch/check"
)

// Report limits: beyond them only what a violation names is drawn or listed.
const (
	reportMaxItems     = 4000
	reportMaxEvents    = 2000
	reportMaxPorcupine = 5000
	// reportPorcupineTimeout bounds the search run for the visualisation of a history the sweep
	// linearized (porcupine did not search it).
	reportPorcupineTimeout = 10 * time.Second
	reportWidth            = 1400
	reportLaneHeight       = 22
	reportLabelWidth       = 110
	reportWatchRespRows    = 300
)

// WriteReport writes a self-contained HTML page about a checked history: the verdict, every
// violation with its diff, a timeline of the operations (one lane per client) and of the watch
// responses (one lane per watch) with what a violation names in red, the responses of each watch
// with a violation, the reference event log, and porcupine's visualisation of the linearizability
// search. The page is well-formed XML (XHTML) and needs no script of its own.
func WriteReport(w io.Writer, h *History, r *Result) error {
	if h == nil || r == nil {
		return fmt.Errorf("etcd: WriteReport needs a history and its result")
	}
	d := buildReport(h, r)
	if !r.hasInfo && r.visualize != nil && len(h.Operations) <= reportMaxPorcupine {
		r.info, r.hasInfo = r.visualize(reportPorcupineTimeout)
	}
	if r.hasInfo && len(h.Operations) <= reportMaxPorcupine {
		var buf bytes.Buffer
		if err := porcupine.Visualize(r.model, r.info, &buf); err != nil {
			return fmt.Errorf("etcd: porcupine visualisation: %w", err)
		}
		d.Porcupine = buf.String()
	}
	return reportTemplate.Execute(w, d)
}

type reportData struct {
	Verdict    Verdict
	OK         bool
	Ops        int
	Watches    int
	EventCount int
	Counts     []guaranteeCount
	Notes      []string
	Violations []reportViolation
	Timeline   timeline
	WatchViews []watchView
	Events     []reportEvent
	EventsCut  int
	Porcupine  string
}

type guaranteeCount struct {
	Guarantee Guarantee
	N         int
}

type reportViolation struct {
	N         int
	Guarantee Guarantee
	Where     string
	Revision  int64
	Message   string
	Diff      string
}

type timeline struct {
	Width, Height int
	Lanes         []lane
	Items         []item
	Partial       bool
}

type lane struct {
	Y     int
	Label string
}

type item struct {
	X, Y, W int
	Class   string
	Title   string
}

type watchView struct {
	N       int
	Request string
	Rows    []watchRow
	Cut     int
}

type watchRow struct {
	N     int
	Class string
	Text  string
}

type reportEvent struct {
	Text string
}

func buildReport(h *History, r *Result) *reportData {
	d := &reportData{Verdict: r.Verdict, OK: r.OK(), Ops: len(h.Operations), Watches: len(h.Watches),
		EventCount: len(r.Events), Notes: r.Notes}
	counts := check.Tally(nil, r.Violations)
	badOp := map[int]bool{}
	badResp := map[[2]int]bool{}
	badWatch := map[int]bool{}
	for i, v := range r.Violations {
		switch {
		case v.Watch >= 0 && v.Response >= 0:
			badResp[[2]int{v.Watch, v.Response}] = true
			badWatch[v.Watch] = true
		case v.Watch >= 0:
			badWatch[v.Watch] = true
		case v.Operation >= 0:
			badOp[v.Operation] = true
		}
		d.Violations = append(d.Violations, reportViolation{N: i, Guarantee: v.Guarantee, Where: v.Where("response", v.Response),
			Revision: v.Revision, Message: v.Message, Diff: v.Diff})
	}
	for _, g := range r.Guarantees() {
		d.Counts = append(d.Counts, guaranteeCount{g, counts[g]})
	}
	d.Timeline = buildTimeline(h, badOp, badResp)
	for wi := range h.Watches {
		if badWatch[wi] {
			d.WatchViews = append(d.WatchViews, buildWatchView(h, wi, badResp))
		}
	}
	for i, ev := range r.Events {
		if i == reportMaxEvents {
			d.EventsCut = len(r.Events) - i
			break
		}
		d.Events = append(d.Events, reportEvent{Text: describeEvent(&ev)})
	}
	return d
}

func buildTimeline(h *History, badOp map[int]bool, badResp map[[2]int]bool) timeline {
	tl := timeline{Width: reportWidth}
	lo, hi := int64(1<<63-1), int64(-1<<63)
	see := func(t int64) { lo, hi = min(lo, t), max(hi, t) }
	clients := map[int]bool{}
	items := 0
	for _, op := range h.Operations {
		see(op.Call)
		see(op.Return)
		clients[op.Client] = true
		items++
	}
	for _, w := range h.Watches {
		see(w.Call)
		for _, r := range w.Responses {
			see(r.Time)
			items++
		}
	}
	tl.Partial = items > reportMaxItems
	if lo > hi {
		lo, hi = 0, 1
	}
	span := max(hi-lo, 1)
	x := func(t int64) int {
		return reportLabelWidth + int(float64(t-lo)/float64(span)*float64(reportWidth-reportLabelWidth-10))
	}
	var ids []int
	for c := range clients {
		ids = append(ids, c)
	}
	sort.Ints(ids)
	laneY := map[int]int{}
	for i, c := range ids {
		y := 10 + i*reportLaneHeight
		laneY[c] = y
		tl.Lanes = append(tl.Lanes, lane{Y: y, Label: fmt.Sprintf("client %d", c)})
	}
	for i, op := range h.Operations {
		if tl.Partial && !badOp[i] {
			continue
		}
		class := "op"
		switch {
		case badOp[i]:
			class = "op bad"
		case op.Unknown:
			class = "op unknown"
		case op.Error != "":
			class = "op failed"
		}
		x0 := x(op.Call)
		tl.Items = append(tl.Items, item{X: x0, Y: laneY[op.Client], W: max(x(op.Return)-x0, 2), Class: class,
			Title: fmt.Sprintf("#%d %s → %s", i, DescribeRequest(&op.Request), DescribeOutcome(&op))})
	}
	base := 10 + len(ids)*reportLaneHeight
	for wi, w := range h.Watches {
		y := base + wi*reportLaneHeight
		tl.Lanes = append(tl.Lanes, lane{Y: y, Label: fmt.Sprintf("watch %d", wi)})
		for ri, r := range w.Responses {
			bad := badResp[[2]int{wi, ri}]
			if tl.Partial && !bad {
				continue
			}
			class := "resp"
			if bad {
				class = "resp bad"
			}
			tl.Items = append(tl.Items, item{X: x(r.Time), Y: y, W: 3, Class: class,
				Title: fmt.Sprintf("watch %d response %d: %s", wi, ri, describeWatchResponse(&r))})
		}
	}
	tl.Height = base + len(h.Watches)*reportLaneHeight + 10
	return tl
}

func buildWatchView(h *History, wi int, badResp map[[2]int]bool) watchView {
	w := &h.Watches[wi]
	req := w.Request
	desc := "watch " + describeRange(req.Key, req.RangeEnd)
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
	v := watchView{N: wi, Request: desc}
	for ri := range w.Responses {
		bad := badResp[[2]int{wi, ri}]
		if len(v.Rows) >= reportWatchRespRows && !bad {
			v.Cut++
			continue
		}
		class := ""
		if bad {
			class = "bad"
		}
		v.Rows = append(v.Rows, watchRow{N: ri, Class: class, Text: describeWatchResponse(&w.Responses[ri])})
	}
	return v
}

func describeWatchResponse(r *WatchResponse) string {
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
		if i == 12 {
			parts = append(parts, fmt.Sprintf("… %d more", len(r.Events)-i))
			break
		}
		parts = append(parts, describeEvent(&r.Events[i]))
	}
	return fmt.Sprintf("header %d: %s", r.Revision, strings.Join(parts, "; "))
}

func describeEvent(ev *Event) string {
	s := fmt.Sprintf("%d %s %s", ev.Kv.ModRevision, ev.Type, short(ev.Kv.Key))
	if ev.Type == Put {
		s += fmt.Sprintf("=%s (create %d, version %d", short(ev.Kv.Value), ev.Kv.CreateRevision, ev.Kv.Version)
		if ev.Kv.Lease != 0 {
			s += fmt.Sprintf(", lease %d", ev.Kv.Lease)
		}
		s += ")"
	}
	if ev.PrevKV != nil {
		s += fmt.Sprintf(" prev %s@%d", short(ev.PrevKV.Value), ev.PrevKV.ModRevision)
	}
	return s
}

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml">
<head>
<meta charset="utf-8"/>
<title>listwatch history check: {{.Verdict}}</title>
<style>
body { font-family: sans-serif; font-size: 14px; margin: 1em 2em; }
table { border-collapse: collapse; }
td, th { border: 1px solid #ccc; padding: 2px 6px; vertical-align: top; text-align: left; }
pre { margin: 0; font-size: 12px; white-space: pre-wrap; }
.ok { color: #070; } .fail { color: #b00; }
svg rect.op { fill: #8ab; } svg rect.op.failed { fill: #bbb; } svg rect.op.unknown { fill: #db8; }
svg rect.bad { fill: #d22; } svg rect.resp { fill: #57a; } svg text { font-size: 11px; }
li.bad { color: #b00; font-weight: bold; }
iframe { width: 100%; height: 800px; border: 1px solid #ccc; }
</style>
</head>
<body>
<h1>History check: <span class="{{if .OK}}ok{{else}}fail{{end}}">{{if .OK}}all guarantees hold{{else}}violations found{{end}}</span></h1>
<p>KV verdict: <b>{{.Verdict}}</b>. {{.Ops}} operations, {{.Watches}} watches, {{.EventCount}} events in the reference log.</p>
{{if .Counts}}<p>Violated: {{range .Counts}}<b>{{.Guarantee}}</b> ({{.N}}) {{end}}</p>{{end}}
{{if .Notes}}<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Violations}}
<h2>Violations</h2>
<table id="violations">
<tr><th>#</th><th>guarantee</th><th>where</th><th>revision</th><th>what</th></tr>
{{range .Violations}}<tr class="violation" id="v{{.N}}"><td>{{.N}}</td><td>{{.Guarantee}}</td><td>{{.Where}}</td><td>{{.Revision}}</td><td>{{.Message}}{{if .Diff}}<pre>{{.Diff}}</pre>{{end}}</td></tr>
{{end}}</table>
{{end}}
<h2>Timeline</h2>
{{if .Timeline.Partial}}<p>Large history: only what a violation names is drawn.</p>{{end}}
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Timeline.Width}}" height="{{.Timeline.Height}}">
{{range .Timeline.Lanes}}<text x="2" y="{{.Y}}" dy="12">{{.Label}}</text>
{{end}}{{range .Timeline.Items}}<rect class="{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="16"><title>{{.Title}}</title></rect>
{{end}}</svg>
{{range .WatchViews}}
<h3>Watch {{.N}}: {{.Request}}</h3>
<ol start="0">{{range .Rows}}<li value="{{.N}}" class="{{.Class}}">{{.Text}}</li>
{{end}}</ol>{{if .Cut}}<p>{{.Cut}} more responses not listed.</p>{{end}}
{{end}}
{{if .Events}}
<h2>Reference event log</h2>
<details><summary>{{.EventCount}} events</summary>
<ol>{{range .Events}}<li>{{.Text}}</li>
{{end}}</ol>{{if .EventsCut}}<p>{{.EventsCut}} more events not listed.</p>{{end}}
</details>
{{end}}
{{if .Porcupine}}
<h2>Linearizability search (porcupine)</h2>
<iframe title="porcupine" srcdoc="{{.Porcupine}}"></iframe>
{{end}}
</body>
</html>
`))
