package main

import (
	"bufio"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
)

// outcome is what one `listwatch check` of a target printed, as the table needs it.
type outcome struct {
	Target string
	// Product and Version are what the check's capabilities line says the store is.
	Product, Version string
	// Verdict is the check's last line (PASS, FAIL: ..., INCONCLUSIVE: ...), or SKIP/ERROR: why.
	Verdict string
	// Found are the catalogued bugs the check named; Fixed the ones whose signature it saw on a
	// version with the fix (counted unexplained).
	Found, Fixed map[string]bool
	// Unexplained and Deviations are the verdict's counts.
	Unexplained, Deviations int
	// Details are the unexplained violations and findings, and the differences from etcd's API.
	Details []string
	// Skipped are the probes the capability table says the run left out (--skip-probe).
	Skipped map[string]bool
}

var (
	capabilitiesLine = regexp.MustCompile(`^capabilities \(store: (\S+), reports etcd ([^;]+);`)
	unexplainedCount = regexp.MustCompile(`(\d+) unexplained`)
	deviationCount   = regexp.MustCompile(`(\d+) differences? from etcd's API`)
	fixedSignature   = regexp.MustCompile(`the signature of (\S+), fixed in`)
	skippedProbe     = regexp.MustCompile(`^  (\S.*?) +skipped +left out by the run$`)
)

// parseOutput reads the standard output of `listwatch check` (cmd/listwatch check.go and
// checketcd.go print these lines).
func parseOutput(name, stdout string) outcome {
	o := outcome{Target: name, Found: map[string]bool{}, Fixed: map[string]bool{}, Skipped: map[string]bool{}}
	inFindings := false
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if m := capabilitiesLine.FindStringSubmatch(line); m != nil {
			o.Product, o.Version = m[1], m[2]
		}
		if m := skippedProbe.FindStringSubmatch(line); m != nil {
			o.Skipped[m[1]] = true
		}
		switch {
		case line == "findings:":
			inFindings = true
		case inFindings && strings.HasPrefix(line, "  known upstream bug: "):
			// the bug's Reference: its trackers, the first naming it
			tracker, _, _ := strings.Cut(strings.TrimPrefix(line, "  known upstream bug: "), " ")
			if b := bugOfTracker(strings.TrimSuffix(tracker, ",")); b != nil {
				o.Found[b.Name] = true
			}
		case inFindings && strings.HasPrefix(line, "  scenario "):
			// a failed scenario: its own lines, above, say whether a known bug explains it
		case inFindings && strings.HasPrefix(line, "  "):
			o.Details = append(o.Details, trimmed)
		case strings.HasPrefix(trimmed, "[unexplained"):
			if m := fixedSignature.FindStringSubmatch(trimmed); m != nil {
				if b := bugOfTracker(m[1]); b != nil {
					o.Fixed[b.Name] = true
				}
			}
			o.Details = append(o.Details, trimmed)
		default:
			inFindings = false
		}
		if line == "PASS" || strings.HasPrefix(line, "PASS,") || strings.HasPrefix(line, "FAIL: ") || strings.HasPrefix(line, "INCONCLUSIVE: ") {
			o.Verdict = line
		}
	}
	if m := unexplainedCount.FindStringSubmatch(o.Verdict); m != nil {
		o.Unexplained, _ = strconv.Atoi(m[1])
	}
	if m := deviationCount.FindStringSubmatch(o.Verdict); m != nil {
		o.Deviations, _ = strconv.Atoi(m[1])
	}
	o.Details = dedupe(o.Details)
	if o.Verdict == "" {
		o.Verdict = "ERROR: no verdict in the output"
	}
	return o
}

// failedOutcome is a target that did not get checked: err says why.
func failedOutcome(name string, err error) outcome {
	verdict := "ERROR: " + firstLine(err.Error())
	if errors.Is(err, errSkipped) {
		verdict = "SKIP: " + firstLine(err.Error())
	}
	return outcome{Target: name, Verdict: verdict}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

func dedupe(lines []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

func bugOfTracker(tracker string) *etcd.KnownBug {
	for _, b := range etcd.KnownBugs {
		if len(b.Trackers) > 0 && b.Trackers[0] == tracker {
			return b
		}
	}
	return nil
}

// storeVersion is the release in a kine target's name ("kine v0.17.5 / SQLite": v0.17.5), which the
// check cannot know (kine reports the etcd version it emulates); empty for other targets.
func storeVersion(target string) string {
	product, rest, _ := strings.Cut(target, " ")
	if product != "kine" {
		return ""
	}
	release, _, _ := strings.Cut(rest, " ")
	return release
}

// cell is what the table says of bug b on the target of o.
func cell(o outcome, b *etcd.KnownBug) string {
	product := o.Product
	if product == "" {
		product, _, _ = strings.Cut(o.Target, " ")
	}
	switch {
	case product != b.Product:
		return "·"
	case strings.HasPrefix(o.Verdict, "SKIP") || strings.HasPrefix(o.Verdict, "ERROR") || strings.HasPrefix(o.Verdict, "CRASH"):
		return "?"
	case o.Fixed[b.Name]:
		return "**seen, though fixed**"
	}
	affected := b.AffectsTarget(etcd.Target{Product: product, Version: o.Version, StoreVersion: storeVersion(o.Target)})
	switch {
	case !affected && o.Found[b.Name]:
		return "**found, though fixed**"
	case !affected:
		return "fixed, not seen"
	case o.Found[b.Name]:
		return "found"
	case !provoked(b):
		return "not provoked"
	}
	return "**not found**"
}

// crashCell is what the table says of the known crash c on the target of o.
func crashCell(o outcome, c *etcd.KnownCrash) string {
	product, _, _ := strings.Cut(o.Target, " ")
	switch {
	case product != c.Product:
		return "·"
	case o.Found[c.Name]:
		return "found"
	case o.Fixed[c.Name]:
		return "**seen, though fixed**"
	case strings.HasPrefix(o.Verdict, "SKIP") || strings.HasPrefix(o.Verdict, "ERROR") || strings.HasPrefix(o.Verdict, "CRASH"):
		return "?"
	case c.SkipProbe != "" && o.Skipped[c.SkipProbe]:
		return "probe skipped"
	case c.AffectsTarget(etcd.Target{Product: product, StoreVersion: storeVersion(o.Target)}):
		return "**not found**"
	}
	return "fixed, not seen"
}

// provoked reports whether a scenario of the check mirrors b: one that no scenario mirrors (a bug
// that needs a restart) is found only if the randomized workload happens on it.
func provoked(b *etcd.KnownBug) bool {
	for _, sc := range workload.Scenarios {
		for _, m := range sc.Mirrors {
			if m == b.Name || len(b.Trackers) > 0 && m == b.Trackers[0] {
				return true
			}
		}
	}
	return false
}

// maxDetails is how many unexplained findings of one target the README lists; the report has all.
const maxDetails = 6

// maxDetailLen cuts a finding's line for the README.
const maxDetailLen = 300

// table is the Markdown table of outcomes, one row a target, one column a catalogued bug, and the
// unexplained findings of each target below it.
func table(outcomes []outcome, run string) string {
	var b strings.Builder
	b.WriteString("| target | reports | verdict |")
	for _, bug := range etcd.KnownBugs {
		fmt.Fprintf(&b, " [%s](https://github.com/%s) |", bug.Name, strings.Replace(bug.Trackers[0], "#", "/issues/", 1))
	}
	for _, c := range etcd.KnownCrashes {
		fmt.Fprintf(&b, " [%s](https://github.com/%s) |", c.Name, strings.Replace(c.Trackers[0], "#", "/issues/", 1))
	}
	b.WriteString(" unexplained | API differences |\n|---|---|---|")
	b.WriteString(strings.Repeat("---|", len(etcd.KnownBugs)+len(etcd.KnownCrashes)+2) + "\n")
	for _, o := range outcomes {
		verdict, _, _ := strings.Cut(o.Verdict, ":")
		version := o.Version
		if version == "" {
			version = "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |", o.Target, version, verdict)
		for _, bug := range etcd.KnownBugs {
			fmt.Fprintf(&b, " %s |", cell(o, bug))
		}
		for _, c := range etcd.KnownCrashes {
			fmt.Fprintf(&b, " %s |", crashCell(o, c))
		}
		fmt.Fprintf(&b, " %d | %d |\n", o.Unexplained, o.Deviations)
	}
	fmt.Fprintf(&b, "\n%s. Cells: found / **not found** / not provoked (no scenario mirrors it) on a version that has the bug; fixed, not seen / **found, though fixed** on one with the fix; · another product's bug; ? not judged: the target was skipped or not checked, or its store crashed (a crash column says whether the crash is the catalogued one; a store that died mid-run answers nothing after, so the bugs' columns are not judged); probe skipped: the run left out the probe that provokes the crash (--skip-probe), to judge the bugs of a release that crashes on it.\n", run)
	for _, o := range outcomes {
		if len(o.Details) == 0 && !strings.HasPrefix(o.Verdict, "SKIP") && !strings.HasPrefix(o.Verdict, "ERROR") {
			continue
		}
		fmt.Fprintf(&b, "\n%s: %s\n", o.Target, o.Verdict)
		for i, d := range o.Details {
			if i == maxDetails {
				fmt.Fprintf(&b, "- ... and %d more, in the report\n", len(o.Details)-i)
				break
			}
			if len(d) > maxDetailLen {
				d = d[:maxDetailLen] + "…"
			}
			fmt.Fprintf(&b, "- %s\n", strings.ReplaceAll(d, "|", `\|`))
		}
	}
	return b.String()
}

// The README's generated part lies between these lines.
const (
	beginMarker = "<!-- zoo table: generated by make zoo, do not edit -->"
	endMarker   = "<!-- end of zoo table -->"
)

// errNoMarkers is a README without the lines that delimit the zoo's table.
var errNoMarkers = errors.New("no zoo table markers")

// splice replaces what lies between the markers in readme with generated.
func splice(readme, generated string) (string, error) {
	i := strings.Index(readme, beginMarker)
	j := strings.Index(readme, endMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("%w: want a line %q and, after it, a line %q", errNoMarkers, beginMarker, endMarker)
	}
	return readme[:i+len(beginMarker)] + "\n" + generated + readme[j:], nil
}
