package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	mdbStartTimeout = 30 * time.Second
	mdbOutFileName  = "mariadb.log" // stdout and stderr, where the server logs
	mdbInitFileName = "init.sql"    // the test account and database, made at the first start
	mdbDataDir      = "data"
	mdbSocketName   = "sock" // the server's Unix socket, inside its directory
	mdbPackage      = "mariadb-server"
	mdbRunAs        = "nobody" // the server's user when testenv runs as root
	mdbReadyLine    = "ready for connections"
)

// The account and database of the servers testenv starts, as MariaDB.DSN
// names them. MariaDBUser has every privilege on MariaDBDatabase and on
// every database whose name starts with "dlock_", and no other.
const (
	MariaDBUser     = "dlock"
	MariaDBPassword = "dlock-test-password"
	MariaDBDatabase = "dlock"
)

// mdbBinaries are the programs testenv runs, found as by LookBinary.
var mdbBinaries = []string{"mariadbd", "mariadb-install-db"}

// lookMariaDB returns the paths of mariadbd and mariadb-install-db, or an
// error that names the Debian package to install.
func lookMariaDB() (server, install string, err error) {
	var paths []string
	for _, name := range mdbBinaries {
		path, err := LookBinary(name)
		if err != nil {
			return "", "", fmt.Errorf("testenv: MariaDB not found (no %s in $PATH, /usr/sbin or /usr/bin); install it with: apt-get install -y %s",
				name, mdbPackage)
		}
		paths = append(paths, path)
	}
	return paths[0], paths[1], nil
}

// LookMariaDB returns nil if a MariaDB server can be run here, and
// otherwise an error that names the Debian package to install.
func LookMariaDB() error {
	_, _, err := lookMariaDB()
	return err
}

// requireMariaDB skips the test if MariaDB is not installed, or fails it
// when the CI environment variable is "true" or "1".
func requireMariaDB(t testing.TB) {
	t.Helper()
	require(t, LookMariaDB())
}

// mariadbs holds every MariaDB that has been started and not closed, for
// StopAll.
var mariadbs serverSet[*MariaDB]

// A MariaDB is a private MariaDB server: one mariadbd process listening on
// 127.0.0.1 only, with its data, Unix socket and log in a temporary
// directory. When testenv runs as root, the server is created and run as
// the unprivileged user "nobody", which owns that directory. It has the
// account MariaDBUser and the database MariaDBDatabase, and root, who
// logs in from 127.0.0.1 without a password. It is tuned for tests, not
// durability: the redo log is written at each commit but not flushed, so
// a committed transaction survives Kill but not a crash of the machine.
//
// Its methods are safe for concurrent use. The address, port and
// directory stay the same across Kill, Stop and Restart; the data too,
// except across RestartEmpty.
type MariaDB struct {
	server  string // the path of mariadbd
	install string // the path of mariadb-install-db
	dir     string
	port    int
	cred    *syscall.Credential // whom to run as; nil for the current user

	mu       sync.Mutex
	proc     *process // the current or last mariadbd; nil before the first start
	closed   bool
	needInit bool // the data is new: the next start runs the init file
}

// LaunchMariaDB creates a data directory with mariadb-install-db in a new
// temporary directory, starts mariadbd on a free port and waits until it
// accepts connections. If the server does not come up within thirty
// seconds, LaunchMariaDB stops it and returns an error that includes the
// tail of its log. The caller must Close the returned MariaDB.
func LaunchMariaDB() (*MariaDB, error) {
	server, install, err := lookMariaDB()
	if err != nil {
		return nil, err
	}
	var startErr error
	for range 3 {
		m, err := newMariaDB(server, install)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		startErr = m.installLocked()
		if startErr == nil {
			startErr = m.startLocked()
		}
		m.mu.Unlock()
		if startErr == nil {
			mariadbs.add(m)
			return m, nil
		}
		m.Close()
		if !errors.Is(startErr, errAddrInUse) {
			break
		}
	}
	return nil, startErr
}

// newMariaDB makes the directory, owned by the server's user, and picks a
// port.
func newMariaDB(server, install string) (*MariaDB, error) {
	m := &MariaDB{server: server, install: install}
	if os.Geteuid() == 0 {
		cred, err := credentialOf(mdbRunAs)
		if err != nil {
			return nil, fmt.Errorf("testenv: running as root, and mariadbd should not; %w", err)
		}
		m.cred = cred
	}
	dir, err := os.MkdirTemp("", "testenv-mariadb-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	m.dir = dir
	if m.cred != nil {
		if err := os.Chown(dir, int(m.cred.Uid), int(m.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("testenv: handing %s to %s: %w", dir, mdbRunAs, err)
		}
	}
	if m.port, err = FreePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return m, nil
}

// credentialOf returns the credential of the named user, with its primary
// group.
func credentialOf(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("no user %q to run it as: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %q: %w", name, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// command returns a command that runs the program at path as the server's
// user, in its directory.
func (m *MariaDB) command(path string, args ...string) *exec.Cmd {
	cmd := exec.Command(path, args...)
	cmd.Dir = m.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: m.cred}
	return cmd
}

// initSQL creates the test database and account.
const initSQL = "CREATE DATABASE IF NOT EXISTS `" + MariaDBDatabase + "` CHARACTER SET utf8mb4;\n" +
	"CREATE USER IF NOT EXISTS '" + MariaDBUser + "'@'127.0.0.1' IDENTIFIED BY '" + MariaDBPassword + "';\n" +
	"GRANT ALL PRIVILEGES ON `" + MariaDBDatabase + "`.* TO '" + MariaDBUser + "'@'127.0.0.1';\n" +
	"GRANT ALL PRIVILEGES ON `" + MariaDBDatabase + `\_%` + "`.* TO '" + MariaDBUser + "'@'127.0.0.1';\n"

// installLocked creates the system tables in an empty data directory,
// with a root account that needs no password; the next start makes the
// test database and account (mariadb-install-db runs without the grant
// tables, so it cannot). m.mu must be held.
func (m *MariaDB) installLocked() error {
	if err := os.WriteFile(filepath.Join(m.dir, mdbInitFileName), []byte(initSQL), 0o644); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	cmd := m.command(m.install, "--no-defaults",
		"--datadir="+filepath.Join(m.dir, mdbDataDir),
		"--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve",
		"--tmpdir="+m.dir) // not /tmp: concurrent bootstraps trip over each other's temporary tables there
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testenv: mariadb-install-db in %s: %v\n%s", m.dir, err, out)
	}
	m.needInit = true
	return nil
}

// startLocked starts mariadbd and waits until it accepts connections. On
// failure the process is gone when startLocked returns. m.mu must be held.
func (m *MariaDB) startLocked() error {
	logPath := filepath.Join(m.dir, mdbOutFileName)
	var logStart int64
	if fi, err := os.Stat(logPath); err == nil {
		logStart = fi.Size()
	}
	args := []string{"--no-defaults",
		"--datadir=" + filepath.Join(m.dir, mdbDataDir),
		"--port=" + strconv.Itoa(m.port),
		"--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(m.dir, mdbSocketName),
		"--pid-file=" + filepath.Join(m.dir, "mariadbd.pid"),
		"--tmpdir=" + m.dir,
		"--skip-name-resolve",
		"--skip-log-bin",
		"--character-set-server=utf8mb4",
		"--max-connections=200",
		"--innodb-buffer-pool-size=32M",
		"--innodb-log-file-size=16M",
		// Tests do not need their writes on disk, and should not wait for
		// them; a commit still reaches the kernel, so it survives Kill.
		"--innodb-flush-log-at-trx-commit=2",
		"--innodb-doublewrite=0",
		"--innodb-buffer-pool-dump-at-shutdown=0",
		"--innodb-use-native-aio=0", // io_uring and AIO limits are shared with other servers
	}
	if m.needInit {
		args = append(args, "--init-file="+filepath.Join(m.dir, mdbInitFileName))
	}
	proc, err := startProcess(m.command(m.server, args...), logPath, "mariadbd")
	if err != nil {
		return err
	}
	m.proc = proc
	if err := m.waitReady(proc, logPath, logStart); err != nil {
		m.proc.kill("mariadbd on " + m.Addr())
		return err
	}
	m.needInit = false
	return nil
}

// waitReady waits until mariadbd proc has logged, past offset logStart of
// its log, that it is ready for connections, and accepts TCP connections
// on the port.
func (m *MariaDB) waitReady(proc *process, logPath string, logStart int64) error {
	deadline := time.Now().Add(mdbStartTimeout)
	pid := proc.cmd.Process.Pid
	for {
		if !proc.running() {
			return proc.exitError("mariadbd on "+m.Addr(), m.LogTail(logTailLines))
		}
		if logged(logPath, logStart, mdbReadyLine) {
			if c, err := net.DialTimeout("tcp", m.Addr(), 500*time.Millisecond); err == nil {
				c.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: mariadbd (pid %d) on %s not ready within %v; log tail:\n%s",
				pid, m.Addr(), mdbStartTimeout, m.LogTail(logTailLines))
		}
		select {
		case <-proc.done:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logged reports whether the file at path holds line past offset start.
func logged(path string, start int64, line string) bool {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < start {
		return false
	}
	return bytes.Contains(b[start:], []byte(line))
}

// StartMariaDB starts a server as LaunchMariaDB does and closes it when
// the test and its subtests complete. If the test has failed by then, the
// tail of the server's log is written with t.Log. StartMariaDB skips the
// test if MariaDB is not installed (or fails it when the CI environment
// variable is "true" or "1") and fails it if the server does not start.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	SkipIfShort(t, "needs MariaDB")
	requireMariaDB(t)
	m, err := LaunchMariaDB()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeForTest(t, "mariadb", m) })
	return m
}

// Addr returns the server's address, "127.0.0.1:port".
func (m *MariaDB) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port))
}

// Port returns the server's TCP port.
func (m *MariaDB) Port() int { return m.port }

// DSN returns a data source name for the database MariaDBDatabase as
// MariaDBUser, in the form github.com/go-sql-driver/mysql takes:
// "dlock:password@tcp(127.0.0.1:port)/dlock".
func (m *MariaDB) DSN() string {
	return MariaDBUser + ":" + MariaDBPassword + "@tcp(" + m.Addr() + ")/" + MariaDBDatabase
}

// RootDSN returns a data source name for the database MariaDBDatabase as
// root, who may do anything, such as kill another account's connections.
func (m *MariaDB) RootDSN() string {
	return "root@tcp(" + m.Addr() + ")/" + MariaDBDatabase
}

// Socket returns the path of the server's Unix socket, which the mariadb
// command-line client takes with -S.
func (m *MariaDB) Socket() string { return filepath.Join(m.dir, mdbSocketName) }

// Dir returns the server's directory, which holds its log, its socket
// and, under "data", its data.
func (m *MariaDB) Dir() string { return m.dir }

// PID returns the process ID of the running mariadbd, or 0 if it is not
// running.
func (m *MariaDB) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.proc.running() {
		return 0
	}
	return m.proc.cmd.Process.Pid
}

// Kill sends SIGKILL to mariadbd, like kill -9, and waits until it is
// gone. It does nothing if the server is not running.
func (m *MariaDB) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc.kill("mariadbd on " + m.Addr())
}

// Stop shuts the server down cleanly (SIGTERM), waits up to five seconds
// and then kills it. It does nothing if the server is not running. A
// paused server is resumed so that it can shut down.
func (m *MariaDB) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc.stop("mariadbd on " + m.Addr())
}

// Pause freezes mariadbd with SIGSTOP. Connections stay open, but nothing
// answers until Resume.
func (m *MariaDB) Pause() error { return m.signal(syscall.SIGSTOP, true) }

// Resume continues a paused server with SIGCONT.
func (m *MariaDB) Resume() error { return m.signal(syscall.SIGCONT, false) }

func (m *MariaDB) signal(sig syscall.Signal, wantStopped bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	what := "mariadbd on " + m.Addr()
	if m.closed {
		return fmt.Errorf("testenv: %s is not running", what)
	}
	return m.proc.signal(what, sig, wantStopped)
}

// Restart starts the server again on the same port and data, stopping it
// first if it is running, and waits until it accepts connections.
func (m *MariaDB) Restart() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("testenv: Restart of closed mariadb %s", m.Addr())
	}
	if err := m.proc.stop("mariadbd on " + m.Addr()); err != nil {
		return err
	}
	return m.startLocked()
}

// RestartEmpty stops the server, deletes its data, creates it afresh with
// mariadb-install-db (the test account and database included) and starts
// it on the same port: like a database restored to nothing.
func (m *MariaDB) RestartEmpty() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("testenv: RestartEmpty of closed mariadb %s", m.Addr())
	}
	if err := m.proc.stop("mariadbd on " + m.Addr()); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(m.dir, mdbDataDir)); err != nil {
		return fmt.Errorf("testenv: wiping mariadb %s: %w", m.Addr(), err)
	}
	if err := m.installLocked(); err != nil {
		return err
	}
	return m.startLocked()
}

// Close stops the server and removes its directory. Close is idempotent.
func (m *MariaDB) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	err := m.proc.stop("mariadbd on " + m.Addr())
	m.mu.Unlock()
	mariadbs.remove(m)
	if rmErr := os.RemoveAll(m.dir); rmErr != nil && err == nil {
		err = fmt.Errorf("testenv: %w", rmErr)
	}
	return err
}

// LogTail returns the last n lines of the server's log.
func (m *MariaDB) LogTail(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Join(tailLines(filepath.Join(m.dir, mdbOutFileName), n), "\n")
}
