package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	pgStartTimeout = 30 * time.Second
	pgOutFileName  = "postgres.log" // stdout and stderr, where the server logs
	pgDataDir      = "data"
	pgPackage      = "postgresql"
	pgRunAs        = "nobody" // the server's user when testenv runs as root
)

// PostgresUser is the superuser of the clusters testenv starts. It logs in
// over TCP on 127.0.0.1 without a password.
const PostgresUser = "postgres"

// pgBinRoot is where the Debian packages install each major version's
// binaries, as pgBinRoot/<version>/bin.
var pgBinRoot = "/usr/lib/postgresql"

// lookPostgres returns the directory that holds the postgres and initdb
// executables: the newest version under pgBinRoot, else the directory of
// postgres on $PATH. It returns an error that names the Debian package to
// install.
func lookPostgres() (string, error) {
	type found struct {
		dir string
		ver int
	}
	var dirs []found
	entries, _ := os.ReadDir(pgBinRoot)
	for _, e := range entries {
		major, _, _ := strings.Cut(e.Name(), ".")
		v, err := strconv.Atoi(major)
		if err != nil {
			continue
		}
		if dir := filepath.Join(pgBinRoot, e.Name(), "bin"); pgBinaries(dir) {
			dirs = append(dirs, found{dir, v})
		}
	}
	if len(dirs) > 0 {
		newest := slices.MaxFunc(dirs, func(a, b found) int { return a.ver - b.ver })
		return newest.dir, nil
	}
	if path, err := exec.LookPath("postgres"); err == nil && pgBinaries(filepath.Dir(path)) {
		return filepath.Dir(path), nil
	}
	return "", fmt.Errorf("testenv: PostgreSQL not found (no %s/<version>/bin/postgres, and no postgres with initdb beside it on $PATH); install it with: apt-get install -y %s",
		pgBinRoot, pgPackage)
}

// pgBinaries reports whether dir holds executable postgres and initdb.
func pgBinaries(dir string) bool {
	for _, name := range []string{"postgres", "initdb"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// LookPostgres returns nil if a PostgreSQL server can be run here, and
// otherwise an error that names the Debian package to install.
func LookPostgres() error {
	_, err := lookPostgres()
	return err
}

// postgreses holds every Postgres that has been started and not closed,
// for StopAll.
var postgreses serverSet[*Postgres]

// A Postgres is a private PostgreSQL cluster: one postmaster and its
// backends, listening on 127.0.0.1 only, with its data in a temporary
// directory. When testenv runs as root, the cluster is created and run as
// the unprivileged user "nobody", which owns that directory, since
// PostgreSQL refuses to run as root. It is tuned for tests, not
// durability: fsync and full-page writes are off, so a committed
// transaction survives Kill but not a crash of the machine.
//
// Its methods are safe for concurrent use. The address, port and
// directory stay the same across Kill, Stop and Restart; the data too,
// except across RestartEmpty.
type Postgres struct {
	daemon                     // its proc is the postmaster
	bin    string              // the directory of postgres and initdb
	cred   *syscall.Credential // whom to run as; nil for the current user
}

// LaunchPostgres creates a cluster with initdb in a new temporary
// directory, starts it on a free port and waits until it accepts
// connections. If the server does not come up within thirty seconds,
// LaunchPostgres stops it and returns an error that includes the tail of
// its log. The caller must Close the returned Postgres.
func LaunchPostgres() (*Postgres, error) {
	bin, err := lookPostgres()
	if err != nil {
		return nil, err
	}
	return launchRetrying(func() (*Postgres, error) {
		p, err := newPostgres(bin)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		err = p.initdbLocked()
		if err == nil {
			err = p.startLocked()
		}
		p.mu.Unlock()
		if err != nil {
			p.Close()
			return nil, err
		}
		postgreses.add(p)
		return p, nil
	})
}

// newPostgres makes the directory, owned by the server's user, and picks
// a port.
func newPostgres(bin string) (*Postgres, error) {
	cred, err := runAs(pgRunAs, "PostgreSQL refuses to")
	if err != nil {
		return nil, err
	}
	p := &Postgres{bin: bin, cred: cred}
	if err := p.makeDir("testenv-postgres-", cred); err != nil {
		return nil, err
	}
	return p, nil
}

// command returns a command that runs the named binary of the cluster's
// version as the cluster's user, in its directory.
func (p *Postgres) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	return cmd
}

// initdbLocked creates an empty cluster in the data directory, with
// PostgresUser as its superuser, trusted on every connection. p.mu must
// be held.
func (p *Postgres) initdbLocked() error {
	cmd := p.command("initdb", "-D", filepath.Join(p.dir, pgDataDir), "-U", PostgresUser,
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testenv: initdb in %s: %v\n%s", p.dir, err, out)
	}
	return nil
}

// startLocked starts the postmaster and waits until it accepts
// connections. On failure every process of it is gone when startLocked
// returns. p.mu must be held.
func (p *Postgres) startLocked(extra ...string) error {
	args := []string{
		"-D", filepath.Join(p.dir, pgDataDir),
		"-p", strconv.Itoa(p.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "dynamic_shared_memory_type=mmap",
		// Tests do not need their writes on disk, and should not wait for
		// them; a commit still reaches the kernel, so it survives Kill.
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
	}
	cmd := p.command("postgres", append(args, extra...)...)
	proc, err := startProcess(cmd, filepath.Join(p.dir, pgOutFileName), "postgres")
	if err != nil {
		return err
	}
	p.proc = proc
	if err := p.waitReady(proc); err != nil {
		p.killLocked()
		return err
	}
	return nil
}

// waitReady waits until the postmaster proc reports itself ready in its
// postmaster.pid file, as pg_ctl does, and accepts TCP connections on the
// port.
func (p *Postgres) waitReady(proc *process) error {
	pid := proc.cmd.Process.Pid
	return proc.poll(pgStartTimeout, 20*time.Millisecond, func() error {
		b, err := os.ReadFile(filepath.Join(p.dir, pgDataDir, "postmaster.pid"))
		if err != nil || !pidFileReady(string(b), pid) {
			return errNotYet
		}
		return dial(p.Addr())
	}, func() error {
		return proc.exitError("postgres on "+p.Addr(), p.LogTail(logTailLines))
	}, func(error) error {
		return fmt.Errorf("testenv: postgres (pid %d) on %s not ready within %v; log tail:\n%s",
			pid, p.Addr(), pgStartTimeout, p.LogTail(logTailLines))
	})
}

// pidFileReady reports whether the text of a postmaster.pid file says that
// the postmaster pid accepts connections: its first line is the PID and
// its eighth the status, "ready" once it does.
func pidFileReady(text string, pid int) bool {
	lines := strings.Split(text, "\n")
	return len(lines) >= 8 && strings.TrimSpace(lines[0]) == strconv.Itoa(pid) && strings.TrimSpace(lines[7]) == "ready"
}

// StartPostgres starts a cluster as LaunchPostgres does and closes it
// when the test and its subtests complete. If the test has failed by then,
// the tail of the server's log is written with t.Log. StartPostgres skips
// the test if PostgreSQL is not installed (or fails it when the CI
// environment variable is "true" or "1") and fails it if the server does
// not start.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	return startForTest(t, "postgres", "needs PostgreSQL", LookPostgres, LaunchPostgres)
}

// Addr returns the server's address, "127.0.0.1:port".
func (p *Postgres) Addr() string { return p.addr() }

// Port returns the server's TCP port.
func (p *Postgres) Port() int { return p.port }

// URL returns a connection string for the database "postgres" as
// PostgresUser, such as pgx.Connect and pgxpool.New take.
func (p *Postgres) URL() string {
	return "postgres://" + PostgresUser + "@" + p.Addr() + "/postgres?sslmode=disable"
}

// Dir returns the server's directory, which holds its log and, under
// "data", the cluster.
func (p *Postgres) Dir() string { return p.dir }

// PID returns the process ID of the running postmaster, or 0 if it is not
// running.
func (p *Postgres) PID() int { return p.pid() }

// Restart starts the server again on the same port and data, stopping it
// first if it is running, and waits until it accepts connections.
func (p *Postgres) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("testenv: Restart of closed postgres %s", p.Addr())
	}
	if err := p.stopLocked(); err != nil {
		return err
	}
	return p.startLocked()
}

// RestartEmpty stops the server, deletes the cluster, creates an empty
// one with initdb and starts it on the same port: like a database
// restored to nothing.
func (p *Postgres) RestartEmpty() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("testenv: RestartEmpty of closed postgres %s", p.Addr())
	}
	if err := p.stopLocked(); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(p.dir, pgDataDir)); err != nil {
		return fmt.Errorf("testenv: wiping postgres %s: %w", p.Addr(), err)
	}
	if err := p.initdbLocked(); err != nil {
		return err
	}
	return p.startLocked()
}

// Backup takes a cold backup of the cluster: it shuts the server down
// cleanly, copies its data to a new directory inside the server's, and
// starts it again. It returns the copy's directory, for RestoreBackup.
func (p *Postgres) Backup() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", fmt.Errorf("testenv: Backup of closed postgres %s", p.Addr())
	}
	if err := p.stopLocked(); err != nil {
		return "", err
	}
	backup, err := copyData(p.dir, pgDataDir)
	if err != nil {
		return "", err
	}
	return backup, p.startLocked()
}

// RestoreBackup kills the server (SIGKILL), replaces its data with the
// copy that Backup made in the directory backup, and starts it again on
// the same port: like a database restored from a backup, or failed over
// to a copy that lags. With newTimeline, the copy starts as a
// point-in-time recovery to the end of its WAL, which begins a new
// timeline, as a failover to a promoted replica does; RestoreBackup
// returns once it accepts writes.
func (p *Postgres) RestoreBackup(backup string, newTimeline bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("testenv: RestoreBackup of closed postgres %s", p.Addr())
	}
	staged, err := stageData(p.dir, pgDataDir, backup)
	if err != nil {
		return err
	}
	if err := p.killLocked(); err != nil {
		return err
	}
	if err := swapData(p.dir, pgDataDir, staged); err != nil {
		return err
	}
	if !newTimeline {
		return p.startLocked()
	}
	signal := filepath.Join(p.dir, pgDataDir, "recovery.signal")
	if err := os.WriteFile(signal, nil, 0o600); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if p.cred != nil {
		if err := os.Chown(signal, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
	}
	// No archive: the recovery ends at the end of the copy's WAL and
	// promotes. Without hot standby, the server takes no connection, and
	// reports itself ready, only once it has.
	return p.startLocked("-c", "restore_command=false", "-c", "hot_standby=off")
}

// copyData copies the data directory called data inside the server's
// directory dir to a new directory inside dir, keeping owners and modes,
// and returns the new directory.
func copyData(dir, data string) (string, error) {
	backup, err := os.MkdirTemp(dir, "backup-")
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(dir, data), filepath.Join(backup, data)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: copying %s: %v: %s", filepath.Join(dir, data), err, out)
	}
	return backup, nil
}

// stageData copies the data directory in backup, which copyData made,
// beside the server's data directory called data inside dir, for
// swapData: the copy takes a while, and the server can run meanwhile.
func stageData(dir, data, backup string) (string, error) {
	staged := filepath.Join(dir, data+".restored")
	if err := os.RemoveAll(staged); err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(backup, data), staged).CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: restoring %s: %v: %s", filepath.Join(backup, data), err, out)
	}
	return staged, nil
}

// swapData replaces the data directory called data inside dir, whose
// server is not running, with the one stageData staged.
func swapData(dir, data, staged string) error {
	if err := os.RemoveAll(filepath.Join(dir, data)); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if err := os.Rename(staged, filepath.Join(dir, data)); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	return nil
}

// Close stops the server and removes its directory. Close is idempotent.
func (p *Postgres) Close() error {
	return p.close(p.stopLocked, func() { postgreses.remove(p) }, true)
}

// LogTail returns the last n lines of the server's log.
func (p *Postgres) LogTail(n int) string { return p.logTail(pgOutFileName, n) }
