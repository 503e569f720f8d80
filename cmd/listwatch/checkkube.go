package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/listwatch/listwatch/check"
	"github.com/listwatch/listwatch/check/kube"
)

// defaultKubeResource is what `check --kube` runs on unless --resource names another.
const defaultKubeResource = "configmaps"

// etcdFlags apply to an etcd target only, not to --kube.
var etcdFlags = []string{"endpoints", "compact-every", "workload", "cluster", "etcd-binary", "faults", "fault-every", "fault-kinds",
	"fault-cmd", "recovery-timeout", "etcd-flag", "restart-cmd", "skip-probe"}

// checkKubeURL accepts http(s)://host[:port][/path], what a rest.Config's Host may be.
func checkKubeURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want http://host:port or https://host:port")
	}
	return nil
}

// parseResource reads resource, version/resource or group/version/resource; a lone resource is
// core v1.
func parseResource(s string) (schema.GroupVersionResource, error) {
	parts := strings.Split(s, "/")
	for _, p := range parts {
		if p == "" {
			return schema.GroupVersionResource{}, errors.New("want resource, version/resource or group/version/resource")
		}
	}
	switch len(parts) {
	case 1:
		return schema.GroupVersionResource{Version: "v1", Resource: parts[0]}, nil
	case 2:
		return schema.GroupVersionResource{Version: parts[0], Resource: parts[1]}, nil
	case 3:
		return schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}, nil
	}
	return schema.GroupVersionResource{}, errors.New("want resource, version/resource or group/version/resource")
}

// runKube is `listwatch check --kube URL`.
func (env checkEnv) runKube(ctx context.Context, f *checkFlags, stdout, stderr io.Writer) error {
	rc := &rest.Config{Host: f.kube}
	dctx, cancel := context.WithTimeout(ctx, f.dialTimeout)
	res, err := kube.Discover(dctx, rc, f.resource)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", f.kube, err)
	}
	f.run.Version = serverVersion(rc, f.dialTimeout)
	res.Namespace = f.namespace
	if res.Namespace == "" {
		res.Namespace = "listwatch-check-" + strconv.FormatUint(f.cfg.Seed, 36)
	}
	rec, err := kube.NewRecorder(rc, res, env.clock)
	if err != nil {
		return err
	}
	defer rec.Close()
	nctx, cancel := context.WithTimeout(ctx, f.dialTimeout)
	created, err := rec.Namespace(nctx)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: %w", f.kube, err)
	}
	cfg := kube.Config{Seed: f.cfg.Seed, Clients: f.cfg.Clients, Watchers: f.cfg.Watchers, Ops: f.cfg.Ops,
		Duration: f.cfg.Duration, RequestTimeout: f.cfg.RequestTimeout, Clock: env.clock, Stats: &kube.Stats{}}
	fmt.Fprintf(stdout, "listwatch check: kube workload, seed %d, %d clients, %d watchers, %s\n", cfg.Seed, cfg.Clients, cfg.Watchers, boundText(f.cfg))
	fmt.Fprintf(stdout, "target: %s, %s (kind %s) in namespace %s\n", f.kube, res.APIVersion()+"/"+res.Resource, res.Kind, res.Namespace)
	h, err := env.recordKube(ctx, rec, cfg, f, stdout, stderr)
	cleanupErr := env.cleanupKube(context.WithoutCancel(ctx), rec, created, f, stdout, stderr)
	if err != nil {
		return errors.Join(err, cleanupErr)
	}
	if err := f.writeHistory(stdout, h.WriteJSON); err != nil {
		return errors.Join(err, cleanupErr)
	}
	return errors.Join(env.checkKubeHistory(ctx, h, f, true, stdout, stderr), cleanupErr)
}

// recordKube runs the kube workload through rec and returns its history, with the run.
func (env checkEnv) recordKube(ctx context.Context, rec *kube.Recorder, cfg kube.Config, f *checkFlags, stdout, stderr io.Writer) (*kube.History, error) {
	start := env.clock.Now()
	fmt.Fprintf(stderr, "recording the kube workload %s...\n", boundText(f.cfg))
	stop := env.progressLines(stderr, start, func(elapsed time.Duration) string {
		s := cfg.Stats.Snapshot()
		return fmt.Sprintf("%6.1fs  requests %d (%.0f/s)  errors %d failed, %d unknown  watches %d  frames %d",
			elapsed.Seconds(), s.Requests, float64(s.Requests)/max(elapsed.Seconds(), 1e-9), s.Failed, s.Unknown, s.Watches, s.Frames) +
			remainingText(f.cfg, s.Requests, elapsed)
	})
	snap, err := kube.Run(ctx, rec, cfg)
	stop()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.kube, err)
	}
	elapsed := env.clock.Since(start)
	h := rec.History()
	if ctx.Err() != nil {
		f.run.Interrupted = true
		fmt.Fprintf(stdout, "interrupted after %v: checking what was recorded (interrupt again to stop the check)\n", elapsed.Round(time.Millisecond))
	}
	h.Run = f.run
	fmt.Fprintf(stdout, "recorded %d requests and %d watches in %v (%.0f requests/s), %d watch frames\n",
		len(h.Operations), len(h.Watches), elapsed.Round(time.Millisecond), float64(snap.Requests)/max(elapsed.Seconds(), 1e-9), snap.Frames)
	return h, nil
}

// cleanupKube deletes the run's objects and, if the run created it, its namespace, and waits
// (bounded by cleanupTimeout) until the namespace is gone; --keep keeps both.
func (env checkEnv) cleanupKube(ctx context.Context, rec *kube.Recorder, created bool, f *checkFlags, stdout, stderr io.Writer) error {
	ns := rec.Resource().Namespace
	if f.keep {
		fmt.Fprintf(stdout, "--keep: the namespace %s and the run's objects are kept\n", ns)
		return nil
	}
	bound := cmp.Or(env.cleanupTimeout, cleanupTimeout)
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	fmt.Fprintf(stderr, "cleaning up namespace %s...\n", ns)
	n, err := rec.DeleteObjects(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if !created {
		fmt.Fprintf(stdout, "cleanup: deleted the run's %d objects in namespace %s (not created by the run, so kept)\n", n, ns)
		return nil
	}
	if err := rec.DeleteNamespace(ctx); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	gone, err := rec.WaitNamespaceGone(ctx, env.clock)
	switch {
	case err != nil:
		return fmt.Errorf("cleanup: %w", err)
	case !gone:
		fmt.Fprintf(stdout, "cleanup: deleted the run's %d objects; namespace %s is still there (Terminating) after %v\n", n, ns, bound)
	default:
		fmt.Fprintf(stdout, "cleanup: deleted the run's %d objects and namespace %s\n", n, ns)
	}
	return nil
}

// serverVersion is the gitVersion the server's /version reports, "" if it reports none.
func serverVersion(rc *rest.Config, timeout time.Duration) string {
	c := rest.CopyConfig(rc)
	c.Timeout = timeout
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return ""
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return ""
	}
	return v.GitVersion
}

// checkKubeFile is `listwatch check --check-history FILE` for a Kubernetes API history; one with
// neither operations nor watches is refused.
func (env checkEnv) checkKubeFile(ctx context.Context, f *checkFlags, file io.Reader, stdout, stderr io.Writer) error {
	h, err := kube.ReadJSON(file)
	if err != nil {
		return fmt.Errorf("%s: %w", f.checkHistory, err)
	}
	if len(h.Operations) == 0 && len(h.Watches) == 0 {
		return fmt.Errorf("%s: %w: no operations and no watches: nothing to check", f.checkHistory, check.ErrInvalidHistory)
	}
	// the file's run stands for this one: an interrupted run's history checks again to INTERRUPTED
	f.run, f.result.Run = h.Run, h.Run
	fmt.Fprintf(stdout, "listwatch check: the Kubernetes API history in %s (%s): %d requests, %d watches\n",
		f.checkHistory, h.Resource, len(h.Operations), len(h.Watches))
	return env.checkKubeHistory(ctx, h, f, false, stdout, stderr)
}

// checkKubeHistory checks h and reports as check does; recorded says h comes from a run.
func (env checkEnv) checkKubeHistory(ctx context.Context, h *kube.History, f *checkFlags, recorded bool, stdout, stderr io.Writer) error {
	writeOperations(stdout, h.Counts())
	f.result.Counts["requests"], f.result.Counts["watches"] = len(h.Operations), len(h.Watches)
	start := env.clock.Now()
	var res *kube.Result
	var err error
	what := fmt.Sprintf("%d requests and %d watches", len(h.Operations), len(h.Watches))
	if ierr := env.checking(checkStop(ctx), stderr, what, f.checkTimeout, func(stop context.Context, phase check.PhaseFunc) {
		res, err = env.checkKube(stop, h, kube.Options{Timeout: f.checkTimeout, Phase: phase})
	}); ierr != nil {
		fmt.Fprintln(stdout, strings.ToUpper(ierr.Error()[:1])+ierr.Error()[1:])
		return f.keepHistory(stdout, ierr, recorded, h.WriteJSON)
	}
	if err != nil {
		return err
	}
	vs := make([]check.Violation, len(res.Violations))
	for i := range res.Violations {
		vs[i] = res.Violations[i].Violation
	}
	f.result.setViolations(vs, nil)
	f.result.Counts["unexplained"] = len(res.Violations)
	f.result.Notes = res.Notes
	took := env.clock.Since(start).Round(time.Millisecond)
	c := res.Coverage
	fmt.Fprintf(stdout, "lists by resourceVersion: %d most recent, %d any (\"0\"), %d not older than, %d exact, %d continued pages, %d refused combinations\n",
		c.Lists[kube.MostRecent], c.Lists[kube.Any], c.Lists[kube.NotOlderThan], c.Lists[kube.Exact], c.Lists[kube.Continuation], c.Lists[kube.Invalid])
	fmt.Fprintf(stdout, "watches: %d (%d from a resourceVersion, %d with initial events, %d from now), %d resumed, %d with selectors\n",
		c.WatchesTotal(), c.Watches["exact"], c.Watches["initial"], c.Watches["now"], c.Resumed, c.SelectorWatches)
	fmt.Fprintf(stdout, "watch frames: %d events, %d bookmarks, %d initial-events-end bookmarks, %d 410 Expired, %d other errors\n",
		c.Events, c.Bookmarks, c.InitialEventsEnd, c.Expired, c.Errors)
	violations := check.Tally(nil, res.Violations)
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "guarantee\tchecked over\tviolations")
	for _, g := range kube.Guarantees {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", g.Guarantee, kube.CheckedOver(g, res), violations[g.Guarantee])
	}
	tw.Flush()
	fmt.Fprintln(stdout)
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	var verdict error
	switch {
	case res.OK() && f.run != nil && f.run.Interrupted:
		fmt.Fprintf(stdout, "checked in %v: INTERRUPTED: no violation in what was recorded before the interrupt; not a PASS\n", took)
	case res.OK():
		fmt.Fprintf(stdout, "checked in %v: PASS\n", took)
	case len(res.Violations) > 0:
		verdict = fmt.Errorf("%w: %d violation(s) of %s", errFail, len(res.Violations), check.List(res.Guarantees()))
		fmt.Fprintf(stdout, "checked in %v: %v\n", took, verdict)
		for i, v := range res.Violations {
			if i == maxViolationsShown {
				fmt.Fprintf(stdout, "... and %d more, in the report\n", len(res.Violations)-i)
				break
			}
			fmt.Fprintln(stdout, v.String())
		}
	default:
		fmt.Fprintf(stdout, "checked in %v: INCONCLUSIVE: the linearizability search did not finish within --check-timeout %v; no violation was found in what could be checked\n",
			took, f.checkTimeout)
		verdict = fmt.Errorf("%w: the linearizability search timed out after %v (raise --check-timeout)", errInconclusive, f.checkTimeout)
	}
	if verdict != nil {
		f.result.Message = verdict.Error()
	}
	verdict = interruptedOr(f, verdict, len(h.Operations))
	return f.keepEvidence(stdout, verdict, recorded, func(w io.Writer) error { return kube.WriteReport(w, h, res, nil) }, h.WriteJSON)
}
