package check

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strings"
)

// Report is what an HTML report of a checked history shows, whichever checker made it: the
// verdict and every violation first, each linking to the timeline items it concerns, then the
// run, the scenario results, the coverage, the timeline, and sections of the checker's own.
// WriteReport writes it.
type Report struct {
	// Title names the check ("listwatch check", "listwatch check --kube").
	Title string
	// Word is Word's PASS, FAIL or INCONCLUSIVE; Verdict the linearizability search's.
	Word    string
	Verdict Verdict
	// Run is the run that recorded the history; nil when unknown (a history without one).
	Run *Run
	// Summary says what the history holds ("600 operations, 12 watches").
	Summary string
	// Findings are what the verdict rests on besides the violations (known bugs, capabilities).
	Findings []string
	// Notes say what could not be checked and why.
	Notes      []string
	Violations []ReportViolation
	Scenarios  []ReportScenario
	// Coverage is the coverage table; the lines counting 0 are named as not exercised.
	Coverage []Count
	// Rows are the timeline's rows (a client's requests, a watch's responses), Items what is
	// drawn in them; Cut counts the items left out of a large history (none a violation names).
	Rows  []ReportRow
	Items []ReportItem
	Cut   int
	// Sections are the checker's own tables (a reference event log, a write log).
	Sections []ReportSection
	// Extra is trusted HTML appended at the end (the porcupine visualisation).
	Extra template.HTML

	// only, when not nil, names the items Add adds: a large history's are cut to what a violation
	// concerns.
	only map[string]bool
}

// ReportViolation is one violation as a report shows it.
type ReportViolation struct {
	Guarantee Guarantee
	// Where locates it ("watch 3 response 2"), Message says what is wrong.
	Where, Message string
	// Label is its known-bug label ("known: etcd-io/etcd#15220"; "unexplained"); Known is set when
	// a known bug of the target explains it.
	Label string
	Known bool
	// Detail is a preformatted diff or what was expected and received.
	Detail string
	// Refs are the timeline items it concerns, in the order to show them.
	Refs []ReportRef
	// Events are the events at fault that no item holds (the ones a watch missed), in full.
	Events []string
}

// ReportRef is a link from a violation to a timeline item.
type ReportRef struct {
	// Item is the item's ID; Text says what it is ("operation 12: put …", "watch 3 response 7").
	Item, Text string
}

// ReportScenario is one scenario's result.
type ReportScenario struct {
	Name, Guarantee string
	// Status is PASS, FAIL or SKIP; Detail says why it failed or was skipped.
	Status, Detail string
	Mirrors        []string
}

// ReportRow is one row of the timeline: a client's requests or a watch's responses.
type ReportRow struct {
	// Kind is "client" or "watch", Index the client's number or the watch's index, Client the
	// client the row is of (a watch's client; -1 when unknown), which the client filter matches.
	Kind   string `json:"kind"`
	Index  int    `json:"index"`
	Client int    `json:"client"`
	// Label names the row; Text describes it in full (a watch's request).
	Label string `json:"label"`
	Text  string `json:"text,omitempty"`
}

// ReportItem is one thing drawn on the timeline: a request from its call to its return, or a watch
// response (or frame) when it was received.
type ReportItem struct {
	// ID is unique in the report ("op-12", "w3-r7"); the timeline draws it as the element with id
	// "i-"+ID.
	ID  string `json:"id"`
	Row int    `json:"row"`
	// Start and End are nanoseconds from the history's origin (End == Start for an instant).
	Start int64 `json:"s"`
	End   int64 `json:"e"`
	// Class is how it is drawn: "ok", "failed", "unknown", "resp", "progress", "canceled".
	Class string `json:"c"`
	// Label is a short description, Text the full one (every key and value).
	Label string `json:"l"`
	Text  string `json:"t"`
	// Keys are the keys (or object names) it names, which the key filter matches.
	Keys []string `json:"k,omitempty"`
	// Violations are the indexes of the violations that concern it.
	Violations []int `json:"v,omitempty"`
}

// ReportSection is a table of the checker's own: a header and rows of cells, of which at most
// Limit are listed (the rest counted).
type ReportSection struct {
	ID, Title string
	Header    []string
	Rows      [][]string
	// More counts the rows left out.
	More int
}

// Limit makes Add keep, of a history with total items, only those a violation's Refs name when
// total is over max; call it once the violations are in.
func (r *Report) Limit(total, max int) {
	if total <= max {
		r.only = nil
		return
	}
	r.only = map[string]bool{}
	for _, v := range r.Violations {
		for _, ref := range v.Refs {
			r.only[ref.Item] = true
		}
	}
}

// Add adds the item with id that build makes, unless Limit leaves it out: then it counts it in Cut
// (build does not run).
func (r *Report) Add(id string, build func() ReportItem) {
	if r.only != nil && !r.only[id] {
		r.Cut++
		return
	}
	it := build()
	it.ID = id
	r.Items = append(r.Items, it)
}

// ClientRows adds a row for each client of a history's n requests (client(i) is request i's), in
// number order, and returns the row of each.
func (r *Report) ClientRows(n int, client func(i int) int) map[int]int {
	sorted := make([]int, n)
	for i := range sorted {
		sorted[i] = client(i)
	}
	slices.Sort(sorted)
	rowOf := map[int]int{}
	for _, c := range slices.Compact(sorted) {
		rowOf[c] = len(r.Rows)
		r.Rows = append(r.Rows, ReportRow{Kind: "client", Index: c, Client: c, Label: fmt.Sprintf("client %d", c)})
	}
	return rowOf
}

//go:embed report.js
var reportJS string

//go:embed report.css
var reportCSS string

// Link marks the items of r that its violations concern, from each violation's Refs, so that an
// item lists its violations.
func (r *Report) Link() {
	index := make(map[string]int, len(r.Items))
	for i := range r.Items {
		index[r.Items[i].ID] = i
	}
	for vi, v := range r.Violations {
		for _, ref := range v.Refs {
			if i, ok := index[ref.Item]; ok {
				it := &r.Items[i]
				if n := len(it.Violations); n == 0 || it.Violations[n-1] != vi {
					it.Violations = append(it.Violations, vi)
				}
			}
		}
	}
}

type reportPage struct {
	*Report
	Missing []string
	CSS     template.CSS
	JS      template.JS
	Data    template.JS
}

// WriteReport writes r as a self-contained HTML page: its style, script and data are inline, so
// that it works offline from a file. The verdict, the run and the violations are plain HTML; the
// timeline is drawn by the script from the data, only what is in view.
func WriteReport(w io.Writer, r *Report) error {
	r.Link()
	data, err := json.Marshal(struct {
		Rows  []ReportRow  `json:"rows"`
		Items []ReportItem `json:"items"`
	}{r.Rows, r.Items})
	if err != nil {
		return fmt.Errorf("check: report data: %w", err)
	}
	// json.Marshal escapes <, > and &, so the data cannot close its script element
	p := reportPage{Report: r, Missing: Missing(r.Coverage), CSS: template.CSS(reportCSS), JS: template.JS(reportJS), Data: template.JS(data)}
	return reportTemplate.Execute(w, p)
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"lower": strings.ToLower,
	"join":  strings.Join,
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"/>
<title>{{.Title}}: {{.Word}}</title>
<style>{{.CSS}}</style>
</head><body>
<header id="verdict" class="verdict {{lower .Word}}">
<h1>{{.Title}}: <span class="word">{{.Word}}</span></h1>
<p>Linearizability search: <b>{{.Verdict}}</b>. {{.Summary}}.{{if .Violations}} <b>{{len .Violations}}</b> violation(s).{{end}}</p>
{{with .Run}}<p class="target">Target: <b>{{if .Target}}{{.Target}}{{else}}unknown{{end}}</b>{{if .Store}} ({{.Store}}{{if .Version}} {{.Version}}{{end}}){{else if .Version}} (version {{.Version}}){{end}}{{if .Workload}}; workload {{.Workload}}{{end}}; seed <b>{{.Seed}}</b>{{if .Interrupted}}; <b>interrupted</b>: the history is what was recorded until then{{end}}</p>{{else}}<p class="target">No run metadata: the history does not say what it was recorded against.</p>{{end}}
</header>
{{if .Findings}}<section id="findings"><h2>Findings</h2><ul>{{range .Findings}}<li>{{.}}</li>{{end}}</ul></section>{{end}}
<section id="violations"><h2>Violations ({{len .Violations}})</h2>
{{if not .Violations}}<p>None.</p>{{end}}
{{range $i, $v := .Violations}}<div class="violation{{if .Known}} known{{end}}" id="v-{{$i}}">
<div class="vhead"><span class="vnum">#{{$i}}</span> <b class="guarantee">{{.Guarantee}}</b>{{if .Where}} <span class="where">{{.Where}}</span>{{end}}{{if .Label}} <span class="label">[{{.Label}}]</span>{{end}}
{{if .Refs}}<button type="button" class="showall" data-violation="{{$i}}">show on the timeline</button>{{end}}</div>
<div class="message">{{.Message}}</div>
{{if .Refs}}<ul class="refs">{{range .Refs}}<li><a class="ref" href="#i-{{.Item}}" data-item="{{.Item}}">{{.Text}}</a></li>{{end}}</ul>{{end}}
{{if .Events}}<details class="events"><summary>events at fault ({{len .Events}})</summary><pre>{{range .Events}}{{.}}
{{end}}</pre></details>{{end}}
{{if .Detail}}<details class="detail"><summary>expected and received</summary><pre>{{.Detail}}</pre></details>{{end}}
</div>
{{end}}</section>
{{if .Notes}}<section id="notes"><h2>Notes</h2><ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul></section>{{end}}
<section id="timeline-section"><h2>Timeline</h2>
<div class="toolbar">
<button type="button" id="zoom-in" title="zoom in (or the mouse wheel over the timeline)">+</button>
<button type="button" id="zoom-out" title="zoom out">−</button>
<button type="button" id="pan-left" title="earlier">◀</button>
<button type="button" id="pan-right" title="later">▶</button>
<button type="button" id="zoom-reset">whole run</button>
<label>key <input type="search" id="f-key" placeholder="part of a key or name"/></label>
<label>client <select id="f-client"><option value="">all</option></select></label>
<label>watch <select id="f-watch"><option value="">all</option></select></label>
<label><input type="checkbox" id="f-bad"/> only what a violation concerns</label>
<span id="tl-status"></span>
</div>
<div id="timeline" class="timeline" tabindex="0"><noscript>The timeline needs JavaScript.</noscript></div>
{{if .Cut}}<p>Large history: {{.Cut}} items (none a violation concerns) are left out of the timeline.</p>{{end}}
<div id="detail" class="detailpanel" hidden="hidden"><div class="dhead"><b id="detail-title"></b> <button type="button" id="detail-close">close</button></div><div id="detail-links"></div><pre id="detail-text"></pre></div>
</section>
<section id="run"><h2>Run</h2>
{{with .Run}}<table class="kv">
<tr><th>target</th><td>{{.Target}}</td></tr>
<tr><th>store</th><td>{{.Store}}</td></tr>
<tr><th>version</th><td>{{.Version}}</td></tr>
<tr><th>capabilities</th><td>{{join .Capabilities ", "}}</td></tr>
<tr><th>workload</th><td>{{.Workload}}</td></tr>
<tr><th>seed</th><td>{{.Seed}}</td></tr>
<tr><th>flags</th><td><code>{{join .Flags " "}}</code></td></tr>
<tr><th>tool</th><td>{{.Tool}}</td></tr>
<tr><th>started</th><td>{{if not .Started.IsZero}}{{.Started.UTC.Format "2006-01-02 15:04:05 MST"}}{{end}}</td></tr>
<tr><th>interrupted</th><td>{{.Interrupted}}</td></tr>
<tr><th>schema</th><td>{{.Schema}}</td></tr>
</table>{{else}}<p>Unknown.</p>{{end}}
</section>
{{if .Scenarios}}<section id="scenarios"><h2>Scenarios</h2>
<table><tr><th>result</th><th>scenario</th><th>guarantee</th><th>detail</th></tr>
{{range .Scenarios}}<tr class="scenario {{lower .Status}}"><td>{{.Status}}</td><td>{{.Name}}{{if .Mirrors}}<br/><small>mirrors {{join .Mirrors ", "}}</small>{{end}}</td><td>{{.Guarantee}}</td><td><pre>{{.Detail}}</pre></td></tr>
{{end}}</table></section>{{end}}
{{if .Coverage}}<section id="coverage"><h2>Coverage</h2>
<table><tr><th>what</th><th>count</th></tr>
{{range .Coverage}}<tr{{if not .N}} class="missing"{{end}}><td>{{.Name}}</td><td>{{.N}}</td></tr>
{{end}}</table>{{if .Missing}}<p>Not exercised: {{join .Missing ", "}}.</p>{{end}}</section>{{end}}
{{range .Sections}}<section id="{{.ID}}"><h2>{{.Title}}</h2>
<details><summary>{{len .Rows}} rows{{if .More}} ({{.More}} more not listed){{end}}</summary>
<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table></details></section>
{{end}}
{{.Extra}}
<script type="application/json" id="report-data">{{.Data}}</script>
<script>{{.JS}}</script>
</body></html>
`))
