package servers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

const (
	mdbStartTimeout = 90 * time.Second
	mdbOutFileName  = "mariadb.log" // stdout and stderr, where the server logs
	mdbInitFileName = "init.sql"    // the test account and database, made at the first start
	mdbDataDir      = "data"
	mdbSocketName   = "sock" // the server's Unix socket, inside its directory
	mdbPackage      = "mariadb-server"
	mdbRunAs        = "nobody" // the server's user when this package runs as root
	mdbReadyLine    = "ready for connections"
)

// The account and database of the servers this package starts, as MariaDB.DSN
// names them. MariaDBUser has every privilege on MariaDBDatabase and on
// every database whose name starts with "dlock_", and no other.
const (
	MariaDBUser     = "dlock"
	MariaDBPassword = "dlock-test-password"
	MariaDBDatabase = "dlock"
)

// mdbBinaries are the programs this package runs, found as by LookBinary.
var mdbBinaries = []string{"mariadbd", "mariadb-install-db"}

// lookMariaDB returns the paths of mariadbd and mariadb-install-db, or an
// error that names the Debian package to install.
func lookMariaDB() (server, install string, err error) {
	var paths []string
	for _, name := range mdbBinaries {
		path, err := LookBinary(name)
		if err != nil {
			return "", "", fmt.Errorf("servers: MariaDB not found (no %s in $PATH, /usr/sbin or /usr/bin); install it with: apt-get install -y %s",
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

// A MariaDB is a private MariaDB server: one mariadbd process listening on
// 127.0.0.1 only, with its data, Unix socket and log in a temporary
// directory. When this package runs as root, the server is created and run as
// the unprivileged user "nobody", which owns that directory. It has the
// account MariaDBUser and the database MariaDBDatabase, and root, who
// logs in from 127.0.0.1 without a password. It is tuned for tests, not
// durability: the redo log is written at each commit but not flushed, so
// a committed transaction survives Kill but not a crash of the machine.
//
// Its methods are safe for concurrent use. The address, port and
// directory stay the same across Kill, Stop and Restart; the data too,
// except across RestartEmpty. Its directory holds its log, its socket and,
// under "data", its data. Stop shuts it down cleanly (SIGTERM).
type MariaDB struct {
	daemon
	server  string              // the path of mariadbd
	install string              // the path of mariadb-install-db
	cred    *syscall.Credential // whom to run as; nil for the current user

	needInit bool // the data is new: the next start runs the init file; under mu
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
	return launchRetrying(func() (*MariaDB, error) {
		m, err := newMariaDB(server, install)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		err = m.installLocked()
		if err == nil {
			err = m.startLocked()
		}
		m.mu.Unlock()
		if err != nil {
			m.Close()
			return nil, err
		}
		running.add(&m.daemon)
		return m, nil
	})
}

// newMariaDB makes the directory, owned by the server's user, and picks a
// port.
func newMariaDB(server, install string) (*MariaDB, error) {
	cred, err := runAs(mdbRunAs, "mariadbd should not")
	if err != nil {
		return nil, err
	}
	m := &MariaDB{daemon: daemon{what: "mariadbd", logs: []string{mdbOutFileName}}, server: server, install: install, cred: cred}
	m.srv = m
	if err := m.makeDir(cred); err != nil {
		return nil, err
	}
	return m, nil
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
// with a root account that needs no password (with mariadb-install-db, or
// from its template); the next start makes the test database and account
// (mariadb-install-db runs without the grant tables, so it cannot). m.mu
// must be held.
func (m *MariaDB) installLocked() error {
	if err := os.WriteFile(filepath.Join(m.dir, mdbInitFileName), []byte(initSQL), 0o644); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	data := filepath.Join(m.dir, mdbDataDir)
	args := []string{"--no-defaults", "--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}
	key := append([]string{m.install, m.server, credName(m.cred)}, args...)
	err := dataFromTemplate("mariadb", key, data, func() error {
		// Its tmpdir not /tmp: concurrent bootstraps trip over each
		// other's temporary tables there.
		cmd := m.command(m.install, append(args, "--datadir="+data, "--tmpdir="+m.dir)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("servers: mariadb-install-db in %s: %v\n%s", m.dir, err, out)
		}
		return nil
	})
	if err != nil {
		return err
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
	err := m.runLocked(m.command(m.server, args...), mdbStartTimeout, "get ready", func(int) error {
		if !logged(logPath, logStart, mdbReadyLine) {
			return errNotYet
		}
		return dial(m.Addr())
	})
	if err == nil {
		m.needInit = false
	}
	return err
}

// restartLocked starts the stopped server again. m.mu must be held.
func (m *MariaDB) restartLocked() error { return startRetrying(m.startLocked) }

// logged reports whether the file at path holds line past offset start.
func logged(path string, start int64, line string) bool {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < start {
		return false
	}
	return bytes.Contains(b[start:], []byte(line))
}

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

// RestartEmpty stops the server, deletes its data, creates it afresh with
// mariadb-install-db (the test account and database included) and starts
// it on the same port: like a database restored to nothing.
func (m *MariaDB) RestartEmpty() error {
	return m.restartWith("RestartEmpty", func() error {
		if err := os.RemoveAll(filepath.Join(m.dir, mdbDataDir)); err != nil {
			return fmt.Errorf("servers: wiping %s: %w", m.name(), err)
		}
		return m.installLocked()
	})
}

// Backup takes a cold backup of the server: it shuts it down cleanly,
// copies its data to a new directory inside the server's, and starts it
// again. It returns the copy's directory, for RestoreBackup.
func (m *MariaDB) Backup() (string, error) { return m.backup(mdbDataDir) }

// RestoreBackup kills the server (SIGKILL), replaces its data with the
// copy that Backup made in the directory backup, and starts it again on
// the same port: like a database restored from a backup, or failed over
// to a copy that lags.
func (m *MariaDB) RestoreBackup(backup string) error {
	return m.locked("RestoreBackup", func() error {
		if err := m.restoreLocked(mdbDataDir, backup); err != nil {
			return err
		}
		return m.startLocked()
	})
}
