package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
)

// etcdRun is what the etcd check learned of its target besides the workload's history: what the
// store is, what it said of itself, what it supports, and what the scenarios found.
type etcdRun struct {
	target etcd.Target
	// findings are what the store said of itself that etcd would not: a Status without revision.
	findings []string
	// notes are reported without failing the check: keys the store held outside the prefix.
	notes     []string
	caps      *workload.Capabilities
	scenarios []workload.ScenarioResult
}

// probeTimeout bounds each request of the probes and the scenarios, and each wait for an answer.
const probeTimeout = 3 * time.Second

// survey reads what the store says of itself, probes its capabilities and runs the scenarios (as
// f asks), printing each part; it sets f.cfg's prefix and features for the workload.
func (env checkEnv) survey(ctx context.Context, t *target, f *checkFlags, stdout, stderr io.Writer) (*etcdRun, error) {
	er := &etcdRun{target: etcd.Target{Version: t.endpoints[0].Version}, findings: workload.StatusFindings(t.endpoints)}
	kctx, cancel := context.WithTimeout(ctx, probeTimeout)
	er.notes = append(er.notes, workload.ForeignKeys(kctx, t.client, f.prefix)...)
	cancel()
	fmt.Fprintln(stderr, "probing what the store supports...")
	caps, err := workload.ProbeCapabilities(ctx, t.client, workload.ProbeConfig{Prefix: f.prefix + "probe/",
		Compaction: f.cfg.CompactEvery > 0, Timeout: probeTimeout, Clock: env.clock, Endpoints: t.endpoints})
	if err != nil {
		return nil, err
	}
	er.caps = caps
	er.target.Product = caps.Product
	writeCapabilities(stdout, caps, er.target)

	gated := f.gating && workload.Gated(er.target)
	f.cfg.Prefix = f.prefix + "run/"
	f.cfg.Avoid = caps.Avoid()
	if gated {
		f.cfg.Avoid = f.cfg.Avoid.With(workload.FeatRequestProgress)
		fmt.Fprintf(stdout, "--apiserver-gating: the apiserver sends no RequestProgress to etcd %s, and neither does this run\n", er.target.Version)
	}
	if avoid := caps.Avoid(); avoid != 0 && !f.scenariosOnly {
		fmt.Fprintf(stdout, "the workload runs without: %s\n", avoid)
	}
	if f.noScenarios {
		return er, nil
	}
	fmt.Fprintln(stderr, "running the scenarios...")
	er.scenarios = workload.RunScenarios(ctx, t.client, workload.ScenarioConfig{Prefix: f.prefix + "scenarios/", Capabilities: caps,
		Compaction: f.cfg.CompactEvery > 0, NoRequestProgress: gated, Target: er.target, Timeout: probeTimeout,
		CheckTimeout: f.checkTimeout, Clock: env.clock})
	writeScenarios(stdout, er.scenarios)
	return er, nil
}

func writeCapabilities(w io.Writer, caps *workload.Capabilities, t etcd.Target) {
	product := t.Product
	if product == "" {
		product = "unknown"
	}
	fmt.Fprintf(w, "\ncapabilities (store: %s, reports etcd %s; differences from etcd marked):\n", product, t.Version)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range caps.Results {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Feature, r.Status, r.Detail)
	}
	tw.Flush()
}

func writeScenarios(w io.Writer, results []workload.ScenarioResult) {
	fmt.Fprintln(w, "\nscenarios:")
	width := 0
	for _, r := range results {
		width = max(width, len(r.Scenario.Name))
	}
	for _, r := range results {
		line := fmt.Sprintf("  %-5s %-*s  %-14s", r.Status(), width, r.Scenario.Name, r.Scenario.Guarantee)
		if len(r.Scenario.Mirrors) > 0 {
			line += "  mirrors " + strings.Join(r.Scenario.Mirrors, ", ")
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		detail := func(format string, args ...any) { fmt.Fprintf(w, "        "+format+"\n", args...) }
		switch {
		case r.Skipped != "":
			detail("skipped: %s", r.Skipped)
		case r.Err != nil:
			detail("%v", r.Err)
		}
		if r.Finding != "" {
			detail("%s %s", bugText(r.FindingBug), r.Finding)
		}
		if r.Result != nil {
			// the scenario's own guarantee first, then one of each other
			shown := map[etcd.Guarantee]bool{}
			for pass := range 2 {
				for i, v := range r.Result.Violations {
					if (v.Guarantee == r.Scenario.Guarantee) != (pass == 0) || pass == 1 && shown[v.Guarantee] || pass == 0 && len(shown) > 0 {
						continue
					}
					shown[v.Guarantee] = true
					detail("%s %s: %s", labelText(r.Labels[i]), v.Guarantee, v.Message)
				}
			}
			if n := len(r.Result.Violations) - len(shown); n > 0 {
				detail("... and %d more violations, of %s", n, check.List(r.Result.Guarantees()))
			}
		}
	}
}

func bugText(b *etcd.KnownBug) string {
	if b == nil {
		return "[unexplained]"
	}
	return "[known: " + b.Trackers[0] + "]"
}

func labelText(l etcd.Label) string {
	switch {
	case l.Known():
		return "[known: " + l.Bug.Trackers[0] + "]"
	case l.Bug != nil:
		return "[unexplained: the signature of " + l.Bug.Trackers[0] + ", fixed in " + l.Bug.FixedIn + "]"
	}
	return "[unexplained]"
}

// writeCoverage says what the run exercised, and names what it did not.
func writeCoverage(w io.Writer, res *etcd.Result, scenarios []workload.ScenarioResult) (missing []string) {
	c, counts := runCoverage(res, scenarios)
	var parts []string
	for _, it := range counts {
		parts = append(parts, it.String())
	}
	missing = check.Missing(counts)
	fmt.Fprintf(w, "coverage: %s\n", strings.Join(parts, ", "))
	if len(missing) > 0 {
		fmt.Fprintf(w, "not exercised: %s\n", strings.Join(missing, ", "))
	}
	if c.Gaps > 0 {
		fmt.Fprintf(w, "gaps: %d runs of %d revisions made by no request of the run (other clients, or the store itself)\n", c.Gaps, c.GapRevisions)
	}
	return missing
}

// runCoverage is what the workload's history (res, nil when none) and the scenarios exercised
// together, and its table.
func runCoverage(res *etcd.Result, scenarios []workload.ScenarioResult) (etcd.Coverage, []check.Count) {
	var c etcd.Coverage
	if res != nil {
		c.Add(res.Coverage)
	}
	fragments := 0
	for _, r := range scenarios {
		if r.Result != nil {
			c.Add(r.Result.Coverage)
		}
		fragments += r.Fragments
	}
	return c, c.Counts(fragments)
}

// writeFindings lists what the verdict rests on besides the violations.
func writeFindings(w io.Writer, er *etcdRun, s workload.Summary) {
	lines := findings(er, s)
	if len(lines) > 0 {
		fmt.Fprintln(w, "findings:")
		for _, l := range lines {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	for _, n := range er.notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// findings are what the verdict rests on besides the violations: the known bugs, the capabilities
// refused or different, what the store said of itself, the scenarios that failed.
func findings(er *etcdRun, s workload.Summary) []string {
	var lines []string
	for _, b := range s.Bugs {
		lines = append(lines, "known upstream bug: "+b.Reference())
	}
	if er.caps != nil {
		for _, d := range er.caps.Deviations() {
			lines = append(lines, fmt.Sprintf("%s %s: %s", d.Feature, d.Status, d.Detail))
		}
	}
	lines = append(lines, er.findings...)
	for _, r := range er.scenarios {
		if !r.Passed() && r.Skipped == "" {
			lines = append(lines, fmt.Sprintf("scenario %s FAIL (%s): %s", r.Scenario.Name, r.Scenario.Guarantee, r.Failure()))
		}
	}
	return lines
}
