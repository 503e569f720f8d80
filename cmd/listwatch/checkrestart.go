package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// etcdFlagList is --etcd-flag, repeatable: flags for the members --cluster starts.
type etcdFlagList []string

func (l *etcdFlagList) String() string { return strings.Join(*l, " ") }

func (l *etcdFlagList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// validateRestart: --etcd-flag goes with --cluster, --restart-cmd with --endpoints; with either
// the scenarios that restart the store run.
func (a *checkArgs) validateRestart(f *checkFlags) error {
	switch {
	case len(a.etcdFlags) > 0 && a.cluster == 0:
		return badFlags("--etcd-flag applies to --cluster only")
	case a.set["restart-cmd"] && a.restartCmd == "":
		return badFlags("--restart-cmd needs a shell command")
	case a.restartCmd != "" && a.cluster > 0:
		return badFlags("--restart-cmd restarts members the tool did not start: --cluster restarts its own")
	case a.restartCmd != "" && !a.set["endpoints"]:
		return badFlags("--restart-cmd needs --endpoints: the in-memory store has no members to restart")
	}
	for _, fl := range a.etcdFlags {
		if !strings.HasPrefix(fl, "-") || strings.TrimLeft(fl, "-") == "" {
			return badFlags("--etcd-flag %q: want an etcd flag, as --name=value", fl)
		}
	}
	f.etcdFlags, f.restartCmd, f.recovery = a.etcdFlags, a.restartCmd, a.recoveryTimeout
	return nil
}

// restarter is the scenarios' ScenarioConfig.Restart: the members --cluster started, each killed
// and restarted in turn, or --restart-cmd; nil when there is neither.
func (env checkEnv) restarter(f *checkFlags) func(ctx context.Context) error {
	switch {
	case f.cluster != nil:
		return func(context.Context) error { return env.restartCluster(f) }
	case f.restartCmd != "":
		return func(ctx context.Context) error { return restartCommand(ctx, f) }
	}
	return nil
}

// restartCluster kills each member of f.cluster and restarts it, waiting for it to be healthy
// before the next.
func (env checkEnv) restartCluster(f *checkFlags) error {
	for i := range f.cluster.Members() {
		if err := f.cluster.Kill(i); err != nil {
			return err
		}
		if env.beforeRestart != nil {
			env.beforeRestart(f.cluster, i)
		}
		if err := f.cluster.Restart(i, f.recovery); err != nil {
			return err
		}
	}
	return nil
}

// restartCommand runs --restart-cmd (the contract is in README's check section), within
// --recovery-timeout.
func restartCommand(ctx context.Context, f *checkFlags) error {
	ctx, cancel := context.WithTimeout(ctx, f.recovery)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", f.restartCmd)
	cmd.Env = append(os.Environ(),
		"LISTWATCH_ENDPOINTS="+strings.Join(f.endpoints, ","),
		fmt.Sprintf("LISTWATCH_SEED=%d", f.cfg.Seed))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("--restart-cmd %q failed (%v); its output:\n%s", f.restartCmd, err, tail(string(out), 2000))
	}
	return nil
}
