package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A daemon is what every server that testenv runs shares (Redis,
// ZooKeeper, Postgres, MariaDB, Etcd): its directory, its client port on
// 127.0.0.1, and under one mutex its current process and whether it has
// been closed; and the plumbing on them. Each server type embeds one.
type daemon struct {
	dir  string
	port int // the client port

	mu     sync.Mutex
	proc   *process // the current or last process; nil before the first start
	closed bool
}

// makeDir gives d a new temporary directory, whose name starts with
// prefix, owned by cred's user if cred is not nil, and a free port. On
// failure nothing is left.
func (d *daemon) makeDir(prefix string, cred *syscall.Credential) error {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("testenv: handing %s to uid %d: %w", dir, cred.Uid, err)
		}
	}
	port, err := FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	d.dir, d.port = dir, port
	return nil
}

// addr returns the client address, "127.0.0.1:port".
func (d *daemon) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)) }

// pid returns the process ID of the running process, or 0 if it is not
// running.
func (d *daemon) pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.proc.running() {
		return 0
	}
	return d.proc.cmd.Process.Pid
}

// logTail returns the last n lines of the file called name in the
// directory, where the server logs.
func (d *daemon) logTail(name string, n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Join(tailLines(filepath.Join(d.dir, name), n), "\n")
}

// signalProc sends sig to the process, as process.signal does, unless the
// server is closed. what names the server in errors.
func (d *daemon) signalProc(what string, sig syscall.Signal, wantStopped bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("testenv: %s is not running", what)
	}
	return d.proc.signal(what, sig, wantStopped)
}

// close marks the server closed and stops it with stopLocked, which runs
// with d.mu held; then calls forget and, if removeDir, removes the
// directory. Only the first call does anything.
func (d *daemon) close(stopLocked func() error, forget func(), removeDir bool) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	err := stopLocked()
	d.mu.Unlock()
	forget()
	if removeDir {
		if rmErr := os.RemoveAll(d.dir); rmErr != nil && err == nil {
			err = fmt.Errorf("testenv: %w", rmErr)
		}
	}
	return err
}

// poll calls ready every interval until it returns nil, the process p
// exits, or timeout passes. It returns nil; exited() if p exited first;
// or late(last), last being ready's last error, if time ran out.
func (p *process) poll(timeout, interval time.Duration, ready func() error, exited func() error, late func(last error) error) error {
	deadline := time.Now().Add(timeout)
	for {
		if !p.running() {
			return exited()
		}
		last := ready()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return late(last)
		}
		select {
		case <-p.done:
		case <-time.After(interval):
		}
	}
}

// errNotYet is what a readiness check returns when there is nothing more
// to say than that the server is not ready yet.
var errNotYet = errors.New("not ready yet")

// launchTries is how many servers a Launch function tries, each on new
// free ports, while the port it took is found taken when the server
// starts: another process may bind it between FreePort and the start.
const launchTries = 3

// launchRetrying calls try, which makes and starts a server and closes it
// again if it does not start, until it succeeds, fails other than with
// errAddrInUse, or has tried launchTries times.
func launchRetrying[T any](try func() (T, error)) (T, error) {
	var srv T
	var err error
	for range launchTries {
		if srv, err = try(); err == nil || !errors.Is(err, errAddrInUse) {
			break
		}
	}
	return srv, err
}

// startForTest starts a server for test t with launch, and closes it when
// t and its subtests complete, logging the tail of its log first if t has
// failed. It skips t under -short, saying that t needs the server (needs,
// such as "needs MariaDB"), and if look reports that the server is not
// installed (or fails t when the CI environment variable is "true" or
// "1"); and it fails t if the server does not start. what names the
// server in logs.
func startForTest[T server](t testing.TB, what, needs string, look func() error, launch func() (T, error)) T {
	t.Helper()
	SkipIfShort(t, needs)
	require(t, look())
	srv, err := launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeForTest(t, what, srv) })
	return srv
}

// runAs returns the credential of the named user, with its primary group,
// when testenv runs as root, and nil otherwise: some servers refuse to
// run as root, or should not. why says so, for errors.
func runAs(name, why string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("testenv: running as root, and %s; no user %q to run it as: %w", why, name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("testenv: running as root, and %s; user %q: %w", why, name, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// dial returns nil if a TCP connection to addr succeeds within half a
// second.
func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	return c.Close()
}

// startRetrying calls start, which starts a stopped server again on its
// old ports, until it succeeds or fails other than with errAddrInUse, for
// up to ten tries three tenths of a second apart: a port of the last
// process may still be held for a moment after it exited.
func startRetrying(start func() error) error {
	for attempt := 0; ; attempt++ {
		err := start()
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == 9 {
			return err
		}
		time.Sleep(300 * time.Millisecond)
	}
}
