package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/listwatch/listwatch/check/etcd"
)

// checkTimeout bounds one run of `listwatch check`.
const checkTimeout = 20 * time.Minute

// config is the driver's command line.
type config struct {
	bin, readme, out, only     string
	seed, ops, compactEvery    int64
	progress                   time.Duration
	collect                    bool
	etcdVersions, kineVersions []string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "zoo:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("zoo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var etcdVersions, kineVersions string
	fs.StringVar(&c.bin, "bin", "", "`directory` of the zoo's binaries (make zoo-build): listwatch, etcd-vX.Y.Z, kine-vX.Y.Z")
	fs.StringVar(&c.readme, "readme", "", "write the table into this README `file`, between its zoo markers")
	fs.StringVar(&c.out, "out", "", "`directory` for each target's output, report and history (default: a new temporary one)")
	fs.StringVar(&c.only, "targets", "", "comma-separated `substrings`: run only the targets whose name holds one")
	fs.StringVar(&etcdVersions, "etcd", "v3.5.12,v3.5.13,v3.5.17,v3.5.18,v3.6.0,v3.7.3", "etcd `versions` of the zoo (besides Debian's 3.4.23)")
	fs.StringVar(&kineVersions, "kine", "v0.14.12,v0.16.5,v0.17.0,v0.17.5", "kine `versions` of the zoo")
	fs.Int64Var(&c.seed, "seed", 7, "the workload's seed, the same for every target")
	fs.Int64Var(&c.ops, "ops", 1500, "the workload's requests")
	fs.Int64Var(&c.compactEvery, "compact-every", 100, "compact every this many revisions")
	fs.BoolVar(&c.collect, "collect", false, "run nothing: make the table of the outputs already in -out (of runs of some targets each)")
	// etcd's default: a notification every 100ms answers the request-progress-after-catching-up
	// scenario's watch on its own, before its RequestProgress is answered or not, and so hides
	// etcd-progress-unsynced now and then
	fs.DurationVar(&c.progress, "progress-notify", 10*time.Minute, "etcd's progress-notify interval (kine keeps its default, 5s)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.collect && c.out == "" {
		return nil, errors.New("-collect needs -out, the directory of the outputs")
	}
	if c.bin == "" && !c.collect {
		return nil, errors.New("-bin is required")
	}
	c.etcdVersions, c.kineVersions = splitList(etcdVersions), splitList(kineVersions)
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// selected reports whether the target named name is one of -targets.
func (c *config) selected(name string) bool {
	if c.only == "" {
		return true
	}
	for _, s := range splitList(c.only) {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// run checks each target in turn and writes the table to stdout, and into -readme.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if c.out == "" {
		if c.out, err = os.MkdirTemp("", "listwatch-zoo-"); err != nil {
			return err
		}
	}
	z := &zoo{bin: c.bin, progress: c.progress}
	defer func() {
		if z.pg != nil {
			if err := z.pg.stop(); err != nil {
				fmt.Fprintln(stderr, "zoo: stopping PostgreSQL:", err)
			}
		}
	}()
	var outcomes []outcome
	for _, t := range targets(c.etcdVersions, c.kineVersions) {
		if !c.selected(t.Name) || ctx.Err() != nil {
			continue
		}
		fmt.Fprintf(stderr, "zoo: %s ...\n", t.Name)
		o := c.checkTarget(ctx, z, t)
		fmt.Fprintf(stderr, "zoo: %s: %s\n", t.Name, o.Verdict)
		outcomes = append(outcomes, o)
	}
	generated := table(outcomes, fmt.Sprintf("`listwatch check --seed %d --ops %d --compact-every %d`, etcd's progress notifications every %v; outputs in %s",
		c.seed, c.ops, c.compactEvery, c.progress, "the driver's -out directory"))
	fmt.Fprint(stdout, generated)
	fmt.Fprintf(stderr, "zoo: outputs, reports and histories in %s\n", c.out)
	if c.readme == "" {
		return ctx.Err()
	}
	readme, err := os.ReadFile(c.readme)
	if err != nil {
		return err
	}
	spliced, err := splice(string(readme), generated)
	if err != nil {
		return fmt.Errorf("%s: %w", c.readme, err)
	}
	return errors.Join(ctx.Err(), os.WriteFile(c.readme, []byte(spliced), 0o644))
}

// checkTarget starts t, runs `listwatch check` against it and stops it.
func (c *config) checkTarget(ctx context.Context, z *zoo, t target) outcome {
	dir := filepath.Join(c.out, slug(t.Name))
	if c.collect {
		out, err := os.ReadFile(filepath.Join(dir, "stdout"))
		if err != nil {
			return failedOutcome(t.Name, fmt.Errorf("%w: not run: %v", errSkipped, err))
		}
		died, _ := os.ReadFile(filepath.Join(dir, "died"))
		return outcomeOf(t.Name, string(out), string(died))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return failedOutcome(t.Name, err)
	}
	s, err := t.start(ctx, z, dir)
	if err != nil {
		return failedOutcome(t.Name, err)
	}
	args := s.targetArgs()
	for _, p := range t.skip {
		args = append(args, "--skip-probe", p)
	}
	out, err := c.runCheck(ctx, args, dir)
	var died string
	if s.died != nil {
		died = s.died()
	}
	err = errors.Join(err, s.stop())
	if died != "" {
		_ = os.WriteFile(filepath.Join(dir, "died"), []byte(died), 0o644)
		return outcomeOf(t.Name, out, died)
	}
	if err != nil {
		return failedOutcome(t.Name, err)
	}
	return parseOutput(t.Name, out)
}

// outcomeOf is the outcome of a check's output; died, if not "", says how a process of the store
// ended under the check: that is the finding, whatever the check printed, explained if it is a
// known crash of the target's release.
func outcomeOf(name, out, died string) outcome {
	o := parseOutput(name, out)
	if died == "" {
		return o
	}
	o.Verdict = "CRASH: " + died
	product, _, _ := strings.Cut(name, " ")
	t := etcd.Target{Product: product, StoreVersion: storeVersion(name)}
	c := etcd.CrashOf(t, died)
	switch {
	case c != nil && c.AffectsTarget(t):
		o.Found[c.Name] = true
		died = "known upstream bug: " + c.Reference() + ": " + died
	case c != nil:
		o.Fixed[c.Name] = true
		o.Unexplained++
		died = "[unexplained: the signature of " + c.Trackers[0] + ", fixed in " + c.FixedIn + "] " + died
	default:
		o.Unexplained++
	}
	o.Details = append([]string{died}, o.Details...)
	return o
}

// targetArgs are the check's flags naming the store: --endpoints, or its own.
func (s *store) targetArgs() []string {
	if s.checkArgs != nil {
		return s.checkArgs
	}
	return []string{"--endpoints", strings.Join(s.endpoints, ",")}
}

// runCheck runs the listwatch binary's check against the target target names, keeping its output,
// report and history in dir, and returns its standard output, also with an error (a store that
// died is judged by it). Exit status 1 is a verdict (FAIL, INCONCLUSIVE), not an error.
func (c *config) runCheck(ctx context.Context, target []string, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	args := append(append([]string{"check"}, target...), "--seed", fmt.Sprint(c.seed), "--ops", fmt.Sprint(c.ops),
		"--compact-every", fmt.Sprint(c.compactEvery),
		"--report", filepath.Join(dir, "report.html"), "--history", filepath.Join(dir, "history.json"))
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "listwatch"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	_ = os.WriteFile(filepath.Join(dir, "stdout"), stdout.Bytes(), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "stderr"), stderr.Bytes(), 0o644)
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return stdout.String(), fmt.Errorf("listwatch check: %w: %s", err, tail(stderr.String()))
	}
	return stdout.String(), nil
}

// slug is a target's name as a directory name.
func slug(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}
