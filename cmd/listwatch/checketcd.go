package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
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

// capabilityNames lists what the probe and the store's status found different from etcd, as the
// findings show them: what a history's run carries (check.Run.Capabilities).
func (er *etcdRun) capabilityNames() []string {
	var out []string
	if er.caps != nil {
		for _, d := range er.caps.Deviations() {
			out = append(out, capabilityLine(d))
		}
	}
	return append(out, er.findings...)
}

func capabilityLine(d workload.Capability) string {
	return fmt.Sprintf("%s %s: %s", d.Feature, d.Status, d.Detail)
}

// noKeyVersionsLine is how capabilityNames begins the line of a store that keeps no key versions.
var noKeyVersionsLine = workload.FeatKeyVersions.String() + " " + workload.Differs.String() + ":"

// noVersions reports whether the store keeps no key versions: answers and events are compared
// without them.
func (er *etcdRun) noVersions() bool {
	if er.caps != nil {
		return er.caps.NoKeyVersions()
	}
	return slices.ContainsFunc(er.findings, func(l string) bool { return strings.HasPrefix(l, noKeyVersionsLine) })
}

// runOf is what a recorded history's run says of its target, for checking the history again as
// the run checked it: its store and version label the violations, its capabilities' differences
// count as they did.
func runOf(r *check.Run) *etcdRun {
	return &etcdRun{target: etcd.Target{Product: r.Store, Version: r.Version}, findings: r.Capabilities}
}

// survey reads what the store says of itself, probes its capabilities and runs the scenarios (as
// f asks), printing each part; it sets f.cfg's prefix and features for the workload. Each request
// of the probes and the scenarios, and each wait for an answer they expect, is bounded by
// --request-timeout: generous, so that a slow store under load is not taken for one that does not
// answer. An interrupt (ctx) skips the scenarios not yet begun.
func (env checkEnv) survey(ctx context.Context, t *target, f *checkFlags, stdout, stderr io.Writer) (*etcdRun, error) {
	rctx := context.WithoutCancel(ctx)
	timeout := f.cfg.RequestTimeout
	er := &etcdRun{target: etcd.Target{Version: t.endpoints[0].Version}, findings: workload.StatusFindings(t.endpoints)}
	kctx, cancel := context.WithTimeout(rctx, timeout)
	er.notes = append(er.notes, workload.ForeignKeys(kctx, t.client, f.prefix)...)
	cancel()
	fmt.Fprintln(stderr, "probing what the store supports...")
	start := env.clock.Now()
	stop := env.progressLines(stderr, start, func(elapsed time.Duration) string {
		return fmt.Sprintf("%6.1fs  probing what the store supports", elapsed.Seconds())
	})
	caps, err := workload.ProbeCapabilities(rctx, t.client, workload.ProbeConfig{Prefix: f.prefix + "probe/",
		Compaction: f.cfg.CompactEvery > 0, Timeout: timeout, Clock: env.clock, Endpoints: t.endpoints, Skip: f.skip})
	stop()
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
	if f.noScenarios || ctx.Err() != nil {
		return er, nil
	}
	er.scenarios = env.scenarios(ctx, t, f, er, gated, stderr)
	writeScenarios(stdout, er.scenarios)
	return er, nil
}

// scenarios runs the scenario suite with a progress line naming the one running.
func (env checkEnv) scenarios(ctx context.Context, t *target, f *checkFlags, er *etcdRun, gated bool, stderr io.Writer) []workload.ScenarioResult {
	fmt.Fprintf(stderr, "running the %d scenarios...\n", len(workload.Scenarios))
	var running atomic.Pointer[string]
	running.Store(new(""))
	start := env.clock.Now()
	stop := env.progressLines(stderr, start, func(elapsed time.Duration) string {
		return fmt.Sprintf("%6.1fs  scenario %s", elapsed.Seconds(), *running.Load())
	})
	defer stop()
	return workload.RunScenarios(context.WithoutCancel(ctx), t.client, workload.ScenarioConfig{Prefix: f.prefix + "scenarios/", Capabilities: er.caps,
		Compaction: f.cfg.CompactEvery > 0, Restart: env.restarter(f), NoRequestProgress: gated, Target: er.target, Timeout: f.cfg.RequestTimeout,
		CheckTimeout: f.checkTimeout, Clock: env.clock, Stop: ctx.Done(),
		Starting: func(i int, sc *workload.Scenario) {
			running.Store(new(fmt.Sprintf("%d/%d %s", i+1, len(workload.Scenarios), sc.Name)))
		}})
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
func writeFindings(w io.Writer, er *etcdRun, s workload.Summary) []string {
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
	return lines
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
			lines = append(lines, capabilityLine(d))
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
