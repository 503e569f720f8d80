package main

import (
	"strings"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/etcd"
	"github.com/listwatch/listwatch/check/etcd/workload"
)

// etcdReportInput is what the etcd check's report shows besides the history and its result: the
// known-bug labels of its violations, the scenarios' results, the coverage of the workload and the
// scenarios together, and the findings.
func etcdReportInput(er *etcdRun, res *etcd.Result, labels []etcd.Label, sum workload.Summary) *etcd.ReportInput {
	_, counts := runCoverage(res, er.scenarios)
	in := &etcd.ReportInput{Labels: labels, Coverage: counts, Findings: findings(er, sum)}
	for i := range er.scenarios {
		r := &er.scenarios[i]
		var detail []string
		switch {
		case r.Skipped != "":
			detail = append(detail, "skipped: "+r.Skipped)
		case !r.Passed():
			detail = append(detail, r.Failure())
		}
		if r.Finding != "" {
			detail = append(detail, bugText(r.FindingBug)+" "+r.Finding)
		}
		in.Scenarios = append(in.Scenarios, check.ReportScenario{Name: r.Scenario.Name, Guarantee: string(r.Scenario.Guarantee),
			Status: r.Status(), Detail: strings.Join(detail, "\n"), Mirrors: r.Scenario.Mirrors})
	}
	return in
}
