package servers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mdbClient returns a command that runs sql with the mariadb command-line
// client as MariaDBUser over TCP, printing bare tab-separated rows.
func mdbClient(ctx context.Context, t *testing.T, m *MariaDB, sql string) *exec.Cmd {
	t.Helper()
	client := requireBinary(t, "mariadb")
	return exec.CommandContext(ctx, client, "--no-defaults", "-h", "127.0.0.1", "-P", strconv.Itoa(m.Port()),
		"-u", MariaDBUser, "-p"+MariaDBPassword, "-N", "-B", "-e", sql, MariaDBDatabase)
}

func TestLookMariaDBNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, _, err := lookMariaDB()
	if _, statErr := os.Stat("/usr/sbin/mariadbd"); statErr == nil {
		if err != nil {
			t.Fatalf("lookMariaDB() with mariadbd in /usr/sbin: %v", err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), "apt-get install -y mariadb-server") {
		t.Errorf("lookMariaDB() with nothing installed: %v; want the package to install", err)
	}
}

func TestIntegrationMariaDB(t *testing.T) {
	t.Parallel()
	var pids []int
	t.Cleanup(func() { // after the server is closed
		for _, pid := range pids {
			if !exited(pid) {
				t.Errorf("mariadbd pid %d still exists after Close", pid)
			}
		}
	})
	m := startMariaDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := func(sql string) string {
		t.Helper()
		out, err := mdbClient(ctx, t, m, sql).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", sql, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if os.Geteuid() == 0 {
		if fi, err := os.Stat(filepath.Join(m.Dir(), mdbDataDir)); err != nil || fi.Sys().(*syscall.Stat_t).Uid == 0 {
			t.Errorf("running as root, the data directory is owned by root (%v)", err)
		}
	}
	if got, want := q("SELECT CONCAT_WS(' ', CURRENT_USER(), DATABASE(), @@port, @@character_set_server)"),
		MariaDBUser+"@127.0.0.1 "+MariaDBDatabase+" "+strconv.Itoa(m.Port())+" utf8mb4"; got != want {
		t.Errorf("user, database, port, charset = %q; want %q", got, want)
	}
	if got := q("SELECT @@datadir"); filepath.Clean(got) != filepath.Join(m.Dir(), mdbDataDir) {
		t.Errorf("datadir = %q; want the data under %s", got, m.Dir())
	}
	if got := q("SELECT @@socket"); got != m.Socket() {
		t.Errorf("socket = %q; want %q", got, m.Socket())
	}
	q("CREATE DATABASE dlock_other") // the account may make databases of its own
	pids = append(pids, m.PID())

	// Pause stops the server: a client that connects meanwhile gets no
	// answer until Resume.
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if st, _ := procState(m.PID()); st != 'T' && st != 't' {
		t.Errorf("mariadbd in state %q after Pause; want stopped", st)
	}
	answered := make(chan error, 1)
	go func() {
		out, err := mdbClient(ctx, t, m, "SELECT 1").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) != "1" {
			err = &exec.Error{Name: "mariadb", Err: os.ErrInvalid}
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("a paused server answered: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-answered; err != nil {
		t.Fatalf("query after Resume: %v", err)
	}

	// Kill and Restart keep committed data; RestartEmpty does not, but
	// makes the account and database again.
	q("CREATE TABLE kept (v int) ENGINE=InnoDB; INSERT INTO kept VALUES (7)")
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if !exited(pids[0]) {
		t.Fatalf("mariadbd %d survived Kill", pids[0])
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	pids = append(pids, m.PID())
	if got := q("SELECT v FROM kept"); got != "7" {
		t.Errorf("row across Kill and Restart = %q; want 7", got)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if !exited(pids[1]) {
		t.Fatalf("mariadbd %d survived Stop", pids[1])
	}
	if err := m.RestartEmpty(); err != nil {
		t.Fatal(err)
	}
	pids = append(pids, m.PID())
	if got := q("SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'kept'"); got != "0" {
		t.Errorf("table survived RestartEmpty")
	}
	if got := q("SELECT @@port"); got != strconv.Itoa(m.Port()) {
		t.Errorf("port %s after restarts; want %d", got, m.Port())
	}

	dir := m.Dir()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s survived Close (%v)", dir, err)
	}
	if err := m.Restart(); err == nil {
		t.Error("Restart after Close succeeded")
	}
	if err := m.Pause(); err == nil {
		t.Error("Pause after Close succeeded")
	}
}
