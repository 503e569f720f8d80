package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
)

// checkResult is check's final result: what --output json writes to stdout, one JSON document.
type checkResult struct {
	// Verdict is PASS, FAIL, INCONCLUSIVE, INTERRUPTED or "COULD NOT RUN"; ExitCode the process's
	// exit status with it.
	Verdict  string `json:"verdict"`
	ExitCode int    `json:"exit_code"`
	// Message is the verdict's line ("FAIL: 1 known upstream bug, 0 unexplained"), or the error
	// that kept the check from running.
	Message string `json:"message,omitempty"`
	// Counts has "requests" and "watches", the size of the history checked (the workload's, or the
	// file's), and the verdict's counts (workload.Summary): "known" (violations and findings
	// explained by known bugs), "unexplained" and "deviations" (differences from etcd's API).
	Counts map[string]int `json:"counts"`
	// Violations are the workload's (or the file's) violations, each labelled.
	Violations []resultViolation `json:"violations,omitempty"`
	// KnownBugs are the known upstream bugs seen, by reference.
	KnownBugs []string `json:"known_bugs,omitempty"`
	// Findings are what else the verdict rests on: capabilities refused or different, what the
	// store said of itself, the scenarios that failed.
	Findings     []string         `json:"findings,omitempty"`
	NotExercised []string         `json:"not_exercised,omitempty"`
	Scenarios    []resultScenario `json:"scenarios,omitempty"`
	Notes        []string         `json:"notes,omitempty"`
	// Report and History are the files written, if any.
	Report  string `json:"report,omitempty"`
	History string `json:"history,omitempty"`
	// Run is what the verdict depends on besides the history: the target, its version, the flags.
	Run *check.Run `json:"run,omitempty"`
	// Faults are the faults --faults injected while the workload ran.
	Faults *faultSummary `json:"faults,omitempty"`
	// Unknown counts the workload's requests of unknown outcome and what the checker decided of
	// them, from the later reads and watch events (etcd.UnknownOutcomes).
	Unknown *etcd.UnknownOutcomes `json:"unknown,omitempty"`
}

type resultViolation struct {
	check.Violation
	// Label is "known: <tracker>", "unexplained", or "unexplained: the signature of <tracker>, fixed
	// in <version>".
	Label string `json:"label"`
}

type resultScenario struct {
	Name      string `json:"name"`
	Guarantee string `json:"guarantee"`
	Status    string `json:"status"`
	Detail    string `json:"detail,omitempty"`
}

// finish sets the verdict from err, the error check returns.
func (r *checkResult) finish(err error) {
	r.Verdict, r.ExitCode = "PASS", 0
	if err == nil {
		return
	}
	r.Message = err.Error()
	r.Verdict, r.ExitCode = "COULD NOT RUN", exitCouldNotRun
	if oe, ok := errors.AsType[*outcomeError](err); ok {
		r.Verdict, r.ExitCode = strings.ToUpper(oe.name), oe.code
	}
}

// setViolations records the workload's violations with their labels (nil: unlabelled, kube).
func (r *checkResult) setViolations(vs []check.Violation, labels []etcd.Label) {
	r.Violations = nil
	for i, v := range vs {
		label := "unexplained"
		if labels != nil {
			label = strings.Trim(labelText(labels[i]), "[]")
		}
		r.Violations = append(r.Violations, resultViolation{Violation: v, Label: label})
	}
}

// setScenarios records the scenarios' statuses.
func (r *checkResult) setScenarios(rs []workload.ScenarioResult) {
	for i := range rs {
		s := &rs[i]
		detail := s.Skipped
		if detail == "" && !s.Passed() {
			detail = s.Failure()
		}
		r.Scenarios = append(r.Scenarios, resultScenario{Name: s.Scenario.Name, Guarantee: string(s.Scenario.Guarantee),
			Status: s.Status(), Detail: detail})
	}
}

func (r *checkResult) setSummary(s workload.Summary) {
	r.Counts["known"], r.Counts["unexplained"], r.Counts["deviations"] = s.Known, s.Unexplained, s.Deviations
	r.KnownBugs = nil
	for _, b := range s.Bugs {
		r.KnownBugs = append(r.KnownBugs, b.Reference())
	}
}

func (r *checkResult) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// streams chooses where check writes: the report (text) on stdout, progress on stderr; with
// --output json the report goes to stderr and stdout has the JSON result alone; --quiet leaves out
// the progress (and, with --output json, the report).
func (f *checkFlags) streams(stdout, stderr io.Writer) (text, progress io.Writer) {
	text, progress = stdout, stderr
	if f.json {
		text = stderr
	}
	if f.quiet {
		progress = io.Discard
		if f.json {
			text = io.Discard
		}
	}
	return text, progress
}

// toolVersion names this build: "listwatch <module version>", "(devel)" for a build from a checkout.
func toolVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return "listwatch " + bi.Main.Version
	}
	return "listwatch (devel)"
}

// newRun is the run metadata a workload run begins with; the target's part is filled in once it answers.
func newRun(f *checkFlags, args []string, started time.Time) *check.Run {
	r := &check.Run{Schema: check.SchemaVersion, Tool: toolVersion(), Workload: string(f.cfg.Kind),
		Seed: int64(f.cfg.Seed), Flags: append([]string(nil), args...), Started: started.UTC()}
	if f.kube != "" {
		r.Workload, r.Target, r.Store = "kube", f.kube, "kube-apiserver"
	}
	return r
}

// checkStop is what stops a check: the first signal if it has not come yet (recording is over, it
// has nothing else to stop), else the second.
func checkStop(ctx context.Context) context.Context {
	if ctx.Err() == nil {
		return ctx
	}
	return abortContext(ctx)
}

// checking runs fn, a check of what, until it returns or stop ends (then errInterrupted); a
// progress line (progressLines) says how long it has run, the part of the check running (fn
// passes its PhaseFunc to the checker) and what bounds the search. fn passes stop to the checker
// (etcd.CheckContext, kube.CheckContext), which returns soon after stop ends: on an interrupt
// checking waits for fn's goroutine to return, then returns errInterrupted.
func (env checkEnv) checking(stop context.Context, progress io.Writer, what string, bound time.Duration, fn func(context.Context, check.PhaseFunc)) error {
	bounded := "the search unbounded (--check-timeout 0)"
	if bound > 0 {
		bounded = fmt.Sprintf("the search bounded by --check-timeout %v", bound)
	}
	fmt.Fprintf(progress, "checking %s (%s)...\n", what, bounded)
	start := env.clock.Now()
	var phase atomic.Pointer[string]
	phase.Store(new("validation"))
	stopProgress := env.progressLines(progress, start, func(elapsed time.Duration) string {
		line := fmt.Sprintf("%6.1fs  checking %s: %s", elapsed.Seconds(), what, *phase.Load())
		if bound > 0 && *phase.Load() == check.PhaseSearch {
			line += fmt.Sprintf(" (at most %v more)", max(0, bound-elapsed).Round(time.Second))
		}
		return line
	})
	defer stopProgress()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(stop, func(name string) { phase.Store(&name) })
	}()
	select {
	case <-done:
		if stop.Err() == nil {
			return nil
		}
	case <-stop.Done():
	}
	at, took := *phase.Load(), env.clock.Since(start).Round(time.Millisecond)
	<-done // the checker returns soon after stop ends
	return fmt.Errorf("%w while checking %s, in %s after %v: no verdict", errInterrupted, what, at, took)
}

// interruptedVerdict is the verdict of a run interrupted while recording whose check found nothing
// in the workload's requests (0: the workload did not begin): not PASS, the run did not do what
// it was asked to.
func interruptedVerdict(requests int) error {
	if requests == 0 {
		return fmt.Errorf("%w before the workload began; no violation in what the scenarios recorded; not a PASS", errInterrupted)
	}
	return fmt.Errorf("%w: no violation in the %d requests recorded before the interrupt; not a PASS", errInterrupted, requests)
}
