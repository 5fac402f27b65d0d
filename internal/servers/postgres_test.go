package servers

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestPidFileReady(t *testing.T) {
	// The layout PostgreSQL 10 and later write: pid, data directory, start
	// time, port, socket directory (empty here), listen address, shared
	// memory key, status.
	file := func(pid, status string) string {
		return pid + "\n/tmp/x/data\n1700000000\n5432\n\n127.0.0.1\n  5432001    123\n" + status + "\n"
	}
	for _, tc := range []struct {
		text string
		want bool
	}{
		{file("42", "ready   "), true},
		{file("42", "starting"), false},
		{file("43", "ready   "), false},
		{"42\n/tmp/x/data\n", false},
		{"", false},
	} {
		if got := pidFileReady(tc.text, 42); got != tc.want {
			t.Errorf("pidFileReady(%q, 42) = %v; want %v", tc.text, got, tc.want)
		}
	}
}

func TestLookPostgresPicksNewestVersion(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "15", "13", "notaversion"} {
		dir := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"postgres", "initdb"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	os.Remove(filepath.Join(root, "13", "bin", "initdb")) // incomplete: not a candidate
	old := pgBinRoot
	pgBinRoot = root
	defer func() { pgBinRoot = old }()
	if got, err := lookPostgres(); err != nil || got != filepath.Join(root, "15", "bin") {
		t.Errorf("lookPostgres() = %q, %v; want version 15's bin", got, err)
	}
	pgBinRoot = filepath.Join(root, "missing")
	t.Setenv("PATH", root)
	_, err := lookPostgres()
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y postgresql") {
		t.Errorf("lookPostgres() with nothing installed: %v; want the package to install", err)
	}
}

// pgQuery runs one query on a new connection to p and returns the first
// column of its first row as text.
func pgQuery(ctx context.Context, p *Postgres, sql string) (string, error) {
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var s string
	err = conn.QueryRow(ctx, sql).Scan(&s)
	return s, err
}

// exited reports whether pid has exited: it is gone, or a zombie that
// nobody reaps (a backend whose postmaster died is reparented to init).
func exited(pid int) bool {
	f := procStat(pid)
	return f == nil || f[0] == "Z" || f[0] == "X"
}

func TestIntegrationPostgres(t *testing.T) {
	t.Parallel()
	var pids []int
	t.Cleanup(func() { // after the server is closed
		for _, pid := range pids {
			if !exited(pid) {
				t.Errorf("postgres pid %d still exists after Close", pid)
			}
		}
	})
	p := startPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := func(sql string) string {
		t.Helper()
		s, err := pgQuery(ctx, p, sql)
		if err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return s
	}
	if os.Geteuid() == 0 {
		if fi, err := os.Stat(filepath.Join(p.Dir(), pgDataDir)); err != nil || fi.Sys().(*syscall.Stat_t).Uid == 0 {
			t.Errorf("running as root, the data directory is owned by root (%v)", err)
		}
	}
	if got := q("SELECT current_user"); got != PostgresUser {
		t.Errorf("current_user = %q; want %q", got, PostgresUser)
	}
	if got := q("SHOW data_directory"); got != filepath.Join(p.Dir(), pgDataDir) {
		t.Errorf("data_directory = %q; want the cluster under %s", got, p.Dir())
	}
	q("SELECT 'ok' FROM (SELECT 1) x WHERE (SELECT count(*) FROM pg_tables) > 0")
	pids = append(pids, p.PID())

	// Pause stops the backends too: a connection opened before it gets
	// no answer until Resume.
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if st, _ := procState(backend); st != 'T' && st != 't' {
		t.Errorf("backend %d in state %q after Pause; want stopped", backend, st)
	}
	answered := make(chan error, 1)
	go func() {
		var one int
		answered <- conn.QueryRow(ctx, "SELECT 1").Scan(&one)
	}()
	select {
	case err := <-answered:
		t.Fatalf("a paused server answered: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("query after Resume: %v", err)
	}

	// Kill and Restart keep the data (fsync is off, but the files were
	// written); RestartEmpty does not.
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int)"); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if !exited(pids[0]) || !exited(backend) {
		t.Fatalf("postmaster %d or backend %d survived Kill", pids[0], backend)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	pids = append(pids, p.PID())
	if got := q("SELECT count(*)::text FROM pg_tables WHERE tablename = 'kept'"); got != "1" {
		t.Errorf("table lost across Kill and Restart")
	}
	if err := p.RestartEmpty(); err != nil {
		t.Fatal(err)
	}
	pids = append(pids, p.PID())
	if got := q("SELECT count(*)::text FROM pg_tables WHERE tablename = 'kept'"); got != "0" {
		t.Errorf("table survived RestartEmpty")
	}
	if got := q("SELECT current_setting('port')"); got != strconv.Itoa(p.Port()) {
		t.Errorf("port %s after restarts; want %d", got, p.Port())
	}

	dir := p.Dir()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s survived Close (%v)", dir, err)
	}
	if err := p.Restart(); err == nil {
		t.Error("Restart after Close succeeded")
	}
	if err := p.Pause(); err == nil {
		t.Error("Pause after Close succeeded")
	}
}
