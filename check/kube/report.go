package kube

import (
	"fmt"
	"html/template"
	"io"
	"sort"

	"github.com/listwatch/listwatch/check"
)

// reportFrames bounds the frames shown per watch and the operations shown around violations.
const (
	reportFrames     = 400
	reportOperations = 2000
)

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>listwatch check --kube: {{.Verdict}}</title>
<style>
body{font-family:sans-serif;margin:1.5em} table{border-collapse:collapse;font-size:90%}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}
.bad{background:#fdd} pre{white-space:pre-wrap;margin:0} h2{margin-top:1.5em}
</style></head><body>
<h1>listwatch check --kube: {{.Verdict}}</h1>
<p>{{.Resource}}; {{.Ops}} requests, {{.Watches}} watches; linearizability search: {{.Search}}.</p>
<h2>Coverage</h2>
<table><tr><th>what</th><th>count</th></tr>
{{range .Coverage}}<tr><td>{{.Name}}</td><td>{{.N}}</td></tr>{{end}}
</table>
{{if .Notes}}<h2>Notes</h2><ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
<h2>Violations ({{len .Violations}})</h2>
{{if not .Violations}}<p>None.</p>{{end}}
<table>{{range .Violations}}<tr class="bad"><td>{{.Guarantee}}</td><td>{{.Where}}</td><td><pre>{{.Message}}</pre>
{{if .Expected}}<pre>expected: {{.Expected}}
received: {{.Received}}</pre>{{end}}</td></tr>{{end}}</table>
{{range .FailingWatches}}<h2 id="watch-{{.Index}}">Watch {{.Index}}</h2>
<p>client {{.Client}}, called at {{.Call}} ns: {{.Options}}; answer {{.Status}}; ended at {{.End}} ns ({{.EndReason}})</p>
<table><tr><th>frame</th><th>time (ns)</th><th>frame</th></tr>
{{range .Frames}}<tr{{if .Bad}} class="bad"{{end}}><td>{{.Index}}</td><td>{{.Call}}</td><td>{{.Text}}</td></tr>{{end}}</table>
{{end}}
<h2>Operations</h2>
<table><tr><th>#</th><th>client</th><th>call (ns)</th><th>return (ns)</th><th>operation</th></tr>
{{range .Operations}}<tr{{if .Bad}} class="bad"{{end}}><td>{{.Index}}</td><td>{{.Client}}</td><td>{{.Call}}</td><td>{{.Return}}</td><td>{{.Text}}</td></tr>{{end}}</table>
{{if .MoreOperations}}<p>… {{.MoreOperations}} more operations are in the history.</p>{{end}}
<h2>Write log</h2>
<table><tr><th>resourceVersion</th><th>operation</th><th>before</th><th>after</th></tr>
{{range .Writes}}<tr><td>{{.RV}}</td><td>{{.Operation}}</td><td>{{.Before}}</td><td>{{.After}}</td></tr>{{end}}</table>
</body></html>
`))

type reportLine struct {
	Index        int
	Client       int
	Call, Return int64
	Text         string
	Bad          bool
}

type reportWatch struct {
	Index, Client, Status int
	Call, End             int64
	Options, EndReason    string
	Frames                []reportLine
}

// WriteReport writes an HTML page of a checked history: the verdict, the coverage, the
// violations with what was expected and received, the frames of every watch with a violation,
// the operations (those with a violation highlighted) and the write log.
func WriteReport(w io.Writer, h *History, res *Result) error {
	verdict := check.Word(res.Verdict, len(res.Violations))
	badOps := map[int]bool{}
	badFrames := map[int]map[int]bool{}
	type viol struct {
		Violation
		Where string
	}
	var violations []viol
	for _, v := range res.Violations {
		switch {
		case v.Watch >= 0:
			if badFrames[v.Watch] == nil {
				badFrames[v.Watch] = map[int]bool{}
			}
			badFrames[v.Watch][v.Frame] = true
		case v.Operation >= 0:
			badOps[v.Operation] = true
		}
		violations = append(violations, viol{v, v.Where("frame", v.Frame)})
	}
	var watches []reportWatch
	var failing []int
	for wi := range badFrames {
		failing = append(failing, wi)
	}
	sort.Ints(failing)
	for _, wi := range failing {
		wt := &h.Watches[wi]
		rw := reportWatch{Index: wi, Client: wt.Client, Status: wt.Status, Call: wt.Call, End: wt.End,
			Options: describeOptions(&wt.Options), EndReason: wt.EndReason}
		for j := range wt.Frames {
			if j == reportFrames {
				break
			}
			rw.Frames = append(rw.Frames, reportLine{Index: j, Call: wt.Frames[j].Time, Text: describeFrame(&wt.Frames[j]), Bad: badFrames[wi][j]})
		}
		watches = append(watches, rw)
	}
	var ops []reportLine
	for i := range h.Operations {
		if len(ops) == reportOperations {
			break
		}
		op := &h.Operations[i]
		ops = append(ops, reportLine{Index: i, Client: op.Client, Call: op.Call, Return: op.Return, Text: describeOperation(op), Bad: badOps[i]})
	}
	type writeLine struct {
		RV            string
		Operation     int
		Before, After string
	}
	var writes []writeLine
	for _, r := range res.Writes {
		rv := fmt.Sprint(r.RV)
		if r.RV == 0 {
			rv = fmt.Sprintf("%d..%d", r.MinRV, r.MaxRV)
		}
		writes = append(writes, writeLine{rv, r.Operation, r.Before.String(), r.After.String()})
	}
	return reportTemplate.Execute(w, map[string]any{
		"Verdict": verdict, "Resource": h.Resource.String(), "Ops": len(h.Operations), "Watches": len(h.Watches),
		"Search": res.Verdict, "Coverage": res.Coverage.Counts(), "Notes": res.Notes, "Violations": violations,
		"FailingWatches": watches, "Operations": ops, "MoreOperations": len(h.Operations) - len(ops), "Writes": writes,
	})
}
