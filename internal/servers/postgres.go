package servers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	pgStartTimeout = 90 * time.Second
	pgOutFileName  = "postgres.log" // stdout and stderr, where the server logs
	pgDataDir      = "data"
	pgPackage      = "postgresql"
	pgRunAs        = "nobody" // the server's user when this package runs as root
)

// PostgresUser is the superuser of the clusters this package starts. It logs in
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
	return "", fmt.Errorf("servers: PostgreSQL not found (no %s/<version>/bin/postgres, and no postgres with initdb beside it on $PATH); install it with: apt-get install -y %s",
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

// A Postgres is a private PostgreSQL cluster: one postmaster and its
// backends, listening on 127.0.0.1 only, with its data in a temporary
// directory. When this package runs as root, the cluster is created and run as
// the unprivileged user "nobody", which owns that directory, since
// PostgreSQL refuses to run as root. It is tuned for tests, not
// durability: fsync and full-page writes are off, so a committed
// transaction survives Kill but not a crash of the machine.
//
// Its methods are safe for concurrent use. The address, port and
// directory stay the same across Kill, Stop and Restart; the data too,
// except across RestartEmpty. Its directory holds its log and, under
// "data", the cluster. Stop asks for a fast shutdown (SIGINT: backends are
// told to exit and the cluster is shut down cleanly); Kill, Pause and
// Resume signal the postmaster and every backend, each of which leads a
// process group of its own.
type Postgres struct {
	daemon                     // its process is the postmaster
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
		running.add(&p.daemon)
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
	p := &Postgres{
		daemon: daemon{what: "postgres", logs: []string{pgOutFileName}, group: true, stop: syscall.SIGINT},
		bin:    bin,
		cred:   cred,
	}
	p.srv = p
	if err := p.makeDir(cred); err != nil {
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
// PostgresUser as its superuser, trusted on every connection (with
// initdb, or from its template). p.mu must be held.
func (p *Postgres) initdbLocked() error {
	data := filepath.Join(p.dir, pgDataDir)
	args := []string{"-U", PostgresUser, "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"}
	key := append([]string{filepath.Join(p.bin, "initdb"), filepath.Join(p.bin, "postgres"), credName(p.cred)}, args...)
	return dataFromTemplate("postgres", key, data, func() error {
		cmd := p.command("initdb", append([]string{"-D", data}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("servers: initdb in %s: %v\n%s", p.dir, err, out)
		}
		return nil
	})
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
	return p.runLocked(p.command("postgres", append(args, extra...)...), pgStartTimeout, "get ready",
		func(pid int) error {
			// Ready, as pg_ctl sees it, in postmaster.pid, and listening.
			b, err := os.ReadFile(filepath.Join(p.dir, pgDataDir, "postmaster.pid"))
			if err != nil || !pidFileReady(string(b), pid) {
				return errNotYet
			}
			return dial(p.Addr())
		})
}

// restartLocked starts the stopped server again. p.mu must be held.
func (p *Postgres) restartLocked() error {
	return startRetrying(func() error { return p.startLocked() })
}

// pidFileReady reports whether the text of a postmaster.pid file says that
// the postmaster pid accepts connections: its first line is the PID and
// its eighth the status, "ready" once it does.
func pidFileReady(text string, pid int) bool {
	lines := strings.Split(text, "\n")
	return len(lines) >= 8 && strings.TrimSpace(lines[0]) == strconv.Itoa(pid) && strings.TrimSpace(lines[7]) == "ready"
}

// URL returns a connection string for the database "postgres" as
// PostgresUser, such as pgx.Connect and pgxpool.New take.
func (p *Postgres) URL() string {
	return "postgres://" + PostgresUser + "@" + p.Addr() + "/postgres?sslmode=disable"
}

// RestartEmpty stops the server, deletes the cluster, creates an empty
// one with initdb and starts it on the same port: like a database
// restored to nothing.
func (p *Postgres) RestartEmpty() error {
	return p.restartWith("RestartEmpty", func() error {
		if err := os.RemoveAll(filepath.Join(p.dir, pgDataDir)); err != nil {
			return fmt.Errorf("servers: wiping %s: %w", p.name(), err)
		}
		return p.initdbLocked()
	})
}

// Backup takes a cold backup of the cluster: it shuts the server down
// cleanly, copies its data to a new directory inside the server's, and
// starts it again. It returns the copy's directory, for RestoreBackup.
func (p *Postgres) Backup() (string, error) { return p.backup(pgDataDir) }

// RestoreBackup kills the server (SIGKILL), replaces its data with the
// copy that Backup made in the directory backup, and starts it again on
// the same port: like a database restored from a backup, or failed over
// to a copy that lags. With newTimeline, the copy starts as a
// point-in-time recovery to the end of its WAL, which begins a new
// timeline, as a failover to a promoted replica does; RestoreBackup
// returns once it accepts writes.
func (p *Postgres) RestoreBackup(backup string, newTimeline bool) error {
	return p.locked("RestoreBackup", func() error {
		if err := p.restoreLocked(pgDataDir, backup); err != nil {
			return err
		}
		if !newTimeline {
			return p.startLocked()
		}
		signal := filepath.Join(p.dir, pgDataDir, "recovery.signal")
		if err := os.WriteFile(signal, nil, 0o600); err != nil {
			return fmt.Errorf("servers: %w", err)
		}
		if p.cred != nil {
			if err := os.Chown(signal, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
				return fmt.Errorf("servers: %w", err)
			}
		}
		// No archive: the recovery ends at the end of the copy's WAL and
		// promotes. Without hot standby, the server takes no connection, and
		// reports itself ready, only once it has.
		return p.startLocked("-c", "restore_command=false", "-c", "hot_standby=off")
	})
}
