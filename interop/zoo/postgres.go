package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
)

// postgres is a private PostgreSQL cluster on a loopback port, its data in a temporary directory,
// run by Debian's postgresql server binaries (as the postgres user when the zoo runs as root,
// which PostgreSQL refuses to run as).
type postgres struct {
	pgCtl, dir string
	port       int
	asUser     []string
}

// pgBinDir is the newest /usr/lib/postgresql/N/bin, Debian's place for the server binaries.
func pgBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a < b
	})
	if len(dirs) == 0 {
		return "", errors.New("no /usr/lib/postgresql/*/bin (apt-get install postgresql)")
	}
	return dirs[len(dirs)-1], nil
}

// startPostgres initialises a cluster with trust authentication and starts it on a free port,
// listening on 127.0.0.1 alone.
func startPostgres(ctx context.Context) (*postgres, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "listwatch-zoo-pg-")
	if err != nil {
		return nil, err
	}
	pg := &postgres{pgCtl: filepath.Join(bin, "pg_ctl"), dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.Join(fmt.Errorf("running as root, and no postgres user to run PostgreSQL as: %w", err), os.RemoveAll(dir))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, errors.Join(err, os.RemoveAll(dir))
		}
		pg.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	pg.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := filepath.Join(dir, "data")
	if err := pg.run(ctx, filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200", pg.port, dir)
	if err := pg.run(ctx, pg.pgCtl, "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "start"); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	return pg, nil
}

func (pg *postgres) run(ctx context.Context, name string, args ...string) error {
	argv := append(append(append([]string{}, pg.asUser...), name), args...)
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(name), err, out)
	}
	return nil
}

// url is the kine --endpoint of database db (kine creates it).
func (pg *postgres) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, db)
}

// stop stops the cluster and removes its data.
func (pg *postgres) stop() error {
	err := pg.run(context.Background(), pg.pgCtl, "-D", filepath.Join(pg.dir, "data"), "-m", "fast", "-w", "stop")
	return errors.Join(err, os.RemoveAll(pg.dir))
}
