package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/listwatch/listwatch/check/etcd"
)

// debianEtcd is Debian's etcd-server package's etcd (3.4.23 in trixie): the zoo's 3.4, which does
// not build with a current Go.
const debianEtcd = "/usr/bin/etcd"

// startTimeout bounds the wait for a started store to accept connections.
const startTimeout = time.Minute

// errSkipped is a target that cannot run here (its binary or PostgreSQL is missing).
var errSkipped = errors.New("skipped")

// store is a running target: its client endpoints and what stops it, or the flags with which the
// check starts and stops it itself (checkArgs, in place of --endpoints).
type store struct {
	endpoints []string
	checkArgs []string
	stop      func() error
	// died, if set, says how a process of the store ended before stop, "" if none did.
	died func() string
}

// target is one store of the zoo.
type target struct {
	// Name names it in the table: "etcd v3.5.12", "kine v0.17.5 / PostgreSQL ×2".
	Name string
	// start starts it, with its data under dir.
	start func(ctx context.Context, z *zoo, dir string) (*store, error)
	// skip are the probes the check leaves out (--skip-probe).
	skip []string
}

// zoo is what the targets share: the binaries' directory, the progress-notify interval, the
// PostgreSQL cluster (started for the first target that needs it).
type zoo struct {
	bin      string
	progress time.Duration
	pgOnce   sync.Once
	pg       *postgres
	pgErr    error
	pgDBs    int
}

// targets lists the zoo: etcd by version, then kine by version over SQLite and over PostgreSQL,
// one and two instances.
func targets(etcdVersions, kineVersions []string) []target {
	ts := []target{{Name: "etcd 3.4.23 (Debian)", start: func(ctx context.Context, z *zoo, dir string) (*store, error) {
		return z.startEtcd(debianEtcd, "--experimental-watch-progress-notify-interval")
	}}}
	for _, v := range etcdVersions {
		flag := "--watch-progress-notify-interval"
		if strings.HasPrefix(v, "v3.5.") {
			flag = "--experimental-watch-progress-notify-interval"
		}
		ts = append(ts, target{Name: "etcd " + v, start: func(ctx context.Context, z *zoo, dir string) (*store, error) {
			return z.startEtcd(filepath.Join(z.bin, "etcd-"+v), flag)
		}})
	}
	for _, v := range kineVersions {
		bin := "kine-" + v
		for _, t := range []target{
			{Name: "kine " + v + " / SQLite", start: func(ctx context.Context, z *zoo, dir string) (*store, error) {
				return z.startKine(ctx, bin, dir, 1, "")
			}},
			{Name: "kine " + v + " / PostgreSQL", start: func(ctx context.Context, z *zoo, dir string) (*store, error) {
				return z.startKinePostgres(ctx, bin, dir, 1)
			}},
			{Name: "kine " + v + " / PostgreSQL ×2", start: func(ctx context.Context, z *zoo, dir string) (*store, error) {
				return z.startKinePostgres(ctx, bin, dir, 2)
			}},
		} {
			ts = append(ts, t)
			ts = append(ts, skipping(t, v)...)
		}
	}
	return ts
}

// skipping is t again, once per catalogued crash of kine release v that a probe provokes, with
// that probe left out: the crash found, the release's other bugs are judged there.
func skipping(t target, v string) []target {
	var out []target
	for _, c := range etcd.KnownCrashes {
		if c.SkipProbe != "" && c.AffectsTarget(etcd.Target{Product: "kine", StoreVersion: v}) {
			out = append(out, target{Name: t.Name + ", " + c.SkipProbe + " skipped", start: t.start, skip: []string{c.SkipProbe}})
		}
	}
	return out
}

// startEtcd has the check start one member of bin (check --cluster 1) with progress notifications
// every z.progress, set by progressFlag (experimental before 3.6): the check then restarts it for
// the scenarios that need a restart.
func (z *zoo) startEtcd(bin, progressFlag string) (*store, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%w: %v (make zoo-build builds it)", errSkipped, err)
	}
	return &store{checkArgs: []string{"--cluster", "1", "--etcd-binary", bin, "--etcd-flag", progressFlag + "=" + z.progress.String()},
		stop: func() error { return nil }}, nil
}

// startKinePostgres starts n kine processes over one new database of the zoo's PostgreSQL cluster.
func (z *zoo) startKinePostgres(ctx context.Context, bin, dir string, n int) (*store, error) {
	z.pgOnce.Do(func() { z.pg, z.pgErr = startPostgres(ctx) })
	if z.pgErr != nil {
		return nil, fmt.Errorf("%w: no PostgreSQL: %v", errSkipped, z.pgErr)
	}
	z.pgDBs++
	return z.startKine(ctx, bin, dir, n, z.pg.url(fmt.Sprintf("kine%d", z.pgDBs)))
}

// startKine starts n kine processes of bin over endpoint (kine's --endpoint; "" is SQLite in dir),
// with kine's defaults but compacting where asked, as etcd does (--compact-min-retain 0, and
// --compact-interval 0: no compaction of its own, the default of v0.16.5 and later; under
// v0.14.12's 5m a client's Compact does nothing, and no compaction scenario provokes anything),
// and no metrics server, and returns once each accepts connections.
func (z *zoo) startKine(ctx context.Context, bin, dir string, n int, endpoint string) (*store, error) {
	path := filepath.Join(z.bin, bin)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%w: %v (make zoo-build builds it)", errSkipped, err)
	}
	s := &store{}
	var procs []*process
	s.died = func() string {
		for _, p := range procs {
			if d := p.died(); d != "" {
				return d
			}
		}
		return ""
	}
	s.stop = func() error {
		var errs []error
		for _, p := range procs {
			errs = append(errs, p.kill())
		}
		return errors.Join(errs...)
	}
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(err, s.stop())
		}
		addr := l.Addr().String()
		l.Close()
		// kine's default progress-notify interval (5s): kine answers RequestProgress on that tick
		args := []string{"--listen-address", addr, "--compact-min-retain", "0", "--compact-interval", "0", "--metrics-bind-address", "0"}
		if endpoint != "" {
			args = append(args, "--endpoint", endpoint)
		}
		p, err := startProcess(ctx, path, filepath.Join(dir, fmt.Sprintf("kine%d", i)), args...)
		if err != nil {
			return nil, errors.Join(err, s.stop())
		}
		procs = append(procs, p)
		if err := p.waitListening(addr); err != nil {
			return nil, errors.Join(err, s.stop())
		}
		s.endpoints = append(s.endpoints, addr)
	}
	return s, nil
}

// process is a started store process whose output goes to a log file.
type process struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed by the goroutine that waits for the process
	once   sync.Once
}

// startProcess runs bin with args in dir (created), its output in dir/log.
func startProcess(ctx context.Context, bin, dir string, args ...string) (*process, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	p := &process{cmd: exec.Command(bin, args...), log: log.Name(), exited: make(chan struct{})}
	p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = dir, log, log
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitListening waits until addr accepts a connection, or fails quoting the log if the process
// exits or startTimeout runs out first.
func (p *process) waitListening(addr string) error {
	deadline := time.Now().Add(startTimeout)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			out, _ := os.ReadFile(p.log)
			return fmt.Errorf("%s exited before it listened on %s: %v\n%s", p.cmd.Path, addr, p.cmd.ProcessState, tail(string(out)))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(p.log)
			return fmt.Errorf("%s did not listen on %s within %v:\n%s", p.cmd.Path, addr, startTimeout, tail(string(out)))
		}
	}
}

// died says how the process ended if it has: its panic or fatal line and the first frame below
// it (function and file), else its exit status; "" while it runs.
func (p *process) died() string {
	select {
	case <-p.exited:
	default:
		return ""
	}
	out, _ := os.ReadFile(p.log)
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.Contains(l, "level=fatal") {
			d := fmt.Sprintf("%s exited: %s", filepath.Base(p.cmd.Path), strings.TrimSpace(l))
			return d + firstFrame(lines[i+1:])
		}
	}
	return fmt.Sprintf("%s exited: %v", filepath.Base(p.cmd.Path), p.cmd.ProcessState)
}

// firstFrame is the first frame of a goroutine's trace in lines: " in " its function (without
// arguments), the line above its file, " at " its file and line; "" if there is none.
func firstFrame(lines []string) string {
	for j, f := range lines {
		if !strings.HasPrefix(f, "\t") || !strings.Contains(f, ".go:") {
			continue
		}
		frame := strings.TrimSpace(f)
		if _, inCache, ok := strings.Cut(frame, "/pkg/mod/"); ok {
			frame = inCache // the module cache's place is no news
		}
		if j == 0 {
			return " at " + frame
		}
		fn := strings.TrimSpace(lines[j-1])
		if k := strings.LastIndex(fn, "("); k > 0 {
			fn = fn[:k]
		}
		return " in " + fn + " at " + frame
	}
	return ""
}

// kill kills the process and waits for it to exit.
func (p *process) kill() error {
	var err error
	p.once.Do(func() {
		if e := p.cmd.Process.Kill(); e != nil && !errors.Is(e, os.ErrProcessDone) {
			err = e
		}
		<-p.exited
	})
	return err
}

// tail is the last lines of a log, for an error.
func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
