package servers

import (
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
	"time"
)

// A daemon is one server that this package runs, of whatever kind (Redis,
// ZooKeeper, Postgres, MariaDB, Etcd): its directory, its client port on
// 127.0.0.1 and its log files, and under one mutex its current process
// and whether it has been closed. Each server type embeds one and so has
// its Addr, Port, Dir, PID, LogTail, Kill, Stop, Pause, Resume, Restart
// and Close; what differs between servers (the command line, when it is
// ready, how it starts again) is the server type's own.
type daemon struct {
	what   string         // the server's program, naming it in errors and logs: "redis-server", "zookeeper", ...
	logs   []string       // the files in dir the server writes; logs[0] receives its stdout and stderr
	dir    string         // the server's directory: its logs, data and files
	port   int            // the client port
	ownDir bool           // Close removes dir
	group  bool           // the process forks children that lead process groups of their own (a postmaster's backends), which signals reach too
	stop   syscall.Signal // what asks the process to shut down; SIGTERM if zero
	log    func(string)   // if not nil, receives the tail of the log, a line a call, on Close
	srv    restarter      // the server type that embeds the daemon

	mu     sync.Mutex
	proc   *process // the current or last process; nil before the first start
	pids   []int    // every PID the server has had
	closed bool
}

// A restarter is what a daemon needs of the server type that embeds it.
type restarter interface {
	// restartLocked starts the stopped server again on its ports and in
	// its directory, and waits until it serves. d.mu is held.
	restartLocked() error
}

// makeDir gives d a new temporary directory, whose name starts with
// "testenv-"+d.what, owned by cred's user if cred is not nil, and a free
// port. Close removes the directory. On failure nothing is left.
func (d *daemon) makeDir(cred *syscall.Credential) error {
	dir, err := os.MkdirTemp("", "testenv-"+d.what+"-")
	if err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return fmt.Errorf("servers: handing %s to uid %d: %w", dir, cred.Uid, err)
		}
	}
	port, err := FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	d.dir, d.port, d.ownDir = dir, port, true
	return nil
}

// name names the server in errors: "redis-server 127.0.0.1:6379".
func (d *daemon) name() string { return d.what + " " + d.Addr() }

// String names the server and its client address, as in
// "redis-server 127.0.0.1:6379".
func (d *daemon) String() string { return d.name() }

// Addr returns the server's client address, "127.0.0.1:port".
func (d *daemon) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.port)) }

// Port returns the server's client port.
func (d *daemon) Port() int { return d.port }

// Dir returns the server's directory, which holds its log and its data.
func (d *daemon) Dir() string { return d.dir }

// PID returns the process ID of the running server, or 0 if it is not
// running.
func (d *daemon) PID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.proc.running() {
		return 0
	}
	return d.proc.cmd.Process.Pid
}

// LogTail returns the last n lines of the server's log, preceded by any
// output it wrote elsewhere.
func (d *daemon) LogTail(n int) string {
	if n <= 0 {
		return ""
	}
	var lines []string
	for _, name := range d.logs {
		lines = append(lines, tailLines(filepath.Join(d.dir, name), n)...)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Kill sends SIGKILL to the server, like kill -9, and waits until it is
// gone. It does nothing if the server is not running.
func (d *daemon) Kill() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.killLocked()
}

// Stop asks the server to shut down, waits up to five seconds and then
// kills it. It does nothing if the server is not running. A paused server
// is resumed so that it can shut down.
func (d *daemon) Stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stopLocked()
}

// Pause freezes the server with SIGSTOP. Connections stay open, but it
// answers nothing, and takes no part in its cluster, until Resume.
func (d *daemon) Pause() error { return d.signal(syscall.SIGSTOP, true) }

// Resume continues a paused server with SIGCONT.
func (d *daemon) Resume() error { return d.signal(syscall.SIGCONT, false) }

// Restart starts the server again on the same ports and directory with
// the same configuration, stopping it first if it is running, and waits
// until it serves, which for a member of a cluster may need a quorum of
// it to be running. The data survives as it would a restart of the
// machine (see the server type). Restart retries for a few seconds while a
// port is still in use.
func (d *daemon) Restart() error { return d.restartWith("Restart", nil) }

// Close stops the server, hands the tail of its log to the server's log
// function if it has one, and removes its directory if this package made it.
// Close is idempotent.
func (d *daemon) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	err := d.stopLocked()
	d.mu.Unlock()
	running.remove(d)
	if d.log != nil {
		if tail := d.LogTail(logTailLines); tail != "" {
			for line := range strings.Lines(tail) {
				d.log(strings.TrimSuffix(line, "\n"))
			}
		}
	}
	if d.ownDir {
		if rmErr := os.RemoveAll(d.dir); rmErr != nil && err == nil {
			err = fmt.Errorf("servers: %w", rmErr)
		}
	}
	return err
}

// locked calls f with d.mu held, unless the server is closed; op names
// the caller in the error then.
func (d *daemon) locked(op string, f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("servers: %s of closed %s", op, d.name())
	}
	return f()
}

// restartWith stops the server, calls between (if not nil) on the stopped
// server, and starts it again as Restart does, all with d.mu held. op
// names the caller in errors.
func (d *daemon) restartWith(op string, between func() error) error {
	return d.locked(op, func() error {
		if err := d.stopLocked(); err != nil {
			return err
		}
		if between != nil {
			if err := between(); err != nil {
				return err
			}
		}
		return d.srv.restartLocked()
	})
}

// runLocked starts cmd as the server's process, with its stdout and
// stderr appended to d.logs[0], and, if ready is not nil, waits with
// waitReady until ready(pid) returns nil; until says what the server then
// does, such as "answer PING". On failure the process is gone when
// runLocked returns. d.mu must be held.
func (d *daemon) runLocked(cmd *exec.Cmd, timeout time.Duration, until string, ready func(pid int) error) error {
	if cmd.Dir == "" {
		cmd.Dir = d.dir
	}
	p, err := startProcess(cmd, filepath.Join(d.dir, d.logs[0]), d.what)
	if err != nil {
		return err
	}
	d.proc = p
	d.pids = append(d.pids, p.cmd.Process.Pid)
	if ready == nil {
		return nil
	}
	if err := d.waitLocked(timeout, 20*time.Millisecond, until, func() error { return ready(p.cmd.Process.Pid) }); err != nil {
		d.killLocked()
		return err
	}
	return nil
}

// waitLocked calls ready every interval until it returns nil, the
// process exits, or timeout passes. The error then names the server, says
// what it did not do (until, such as "answer PING"), and ends with the
// tail of its log; it matches errAddrInUse if the process exited because
// its port was taken. d.mu must be held.
func (d *daemon) waitLocked(timeout, interval time.Duration, until string, ready func() error) error {
	p := d.proc
	deadline := time.Now().Add(timeout)
	for {
		if !p.running() {
			return p.exitError(d.name(), d.LogTail)
		}
		last := ready()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			why := ""
			if !errors.Is(last, errNotYet) {
				why = " (" + last.Error() + ")"
			}
			return fmt.Errorf("servers: %s (pid %d) did not %s within %v%s; log tail:\n%s",
				d.name(), p.cmd.Process.Pid, until, timeout, why, d.LogTail(logTailLines))
		}
		select {
		case <-p.done:
		case <-time.After(interval):
		}
	}
}

// family returns the PIDs the server's signals go to: its process's and,
// for a group, those of its children. d.mu must be held and the process
// running.
func (d *daemon) family() []int {
	pid := d.proc.cmd.Process.Pid
	if d.group {
		return withChildren(pid)
	}
	return []int{pid}
}

// killLocked sends SIGKILL to the process (and its children, for a group)
// and waits until they are gone. d.mu must be held.
func (d *daemon) killLocked() error {
	p := d.proc
	if !p.running() {
		return nil
	}
	family := d.family()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("servers: killing %s: %w", d.name(), err)
	}
	for _, pid := range family[1:] {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		return fmt.Errorf("servers: %s (pid %d) did not exit after SIGKILL", d.name(), family[0])
	}
	return waitGone(family[1:], stopTimeout)
}

// stopLocked sends the process its stop signal (and SIGCONT, to the
// children too, so that a paused server can act on it), waits up to
// stopTimeout, then kills it. d.mu must be held.
func (d *daemon) stopLocked() error {
	p := d.proc
	if !p.running() {
		return nil
	}
	family := d.family()
	sig := d.stop
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	p.cmd.Process.Signal(sig)
	p.cmd.Process.Signal(syscall.SIGCONT)
	for _, pid := range family[1:] {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	select {
	case <-p.done:
		return waitGone(family[1:], stopTimeout)
	case <-time.After(stopTimeout):
	}
	return d.killLocked()
}

// signal sends sig to the running process (and its children, for a
// group: the parent first, since it forks no child once stopped), and
// waits up to a second until each one's state reflects it: stopped if
// wantStopped, otherwise not stopped.
func (d *daemon) signal(sig syscall.Signal, wantStopped bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.proc
	if d.closed || !p.running() {
		return fmt.Errorf("servers: %s is not running", d.name())
	}
	family := d.family()
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("servers: signalling %s: %w", d.name(), err)
	}
	for _, pid := range family[1:] {
		syscall.Kill(pid, sig)
	}
	deadline := time.Now().Add(time.Second)
	for i, pid := range family {
		for time.Now().Before(deadline) && (i > 0 || p.running()) {
			state, ok := procState(pid)
			if !ok || state == 'Z' || (state == 'T' || state == 't') == wantStopped {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
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

// runAs returns the credential of the named user, with its primary group,
// when this package runs as root, and nil otherwise: some servers refuse to
// run as root, or should not. why says so, for errors.
func runAs(name, why string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("servers: running as root, and %s; no user %q to run it as: %w", why, name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("servers: running as root, and %s; user %q: %w", why, name, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// credName names the user cred runs as, for a template's key: "" for
// the current user.
func credName(cred *syscall.Credential) string {
	if cred == nil {
		return ""
	}
	return fmt.Sprintf("uid %d gid %d", cred.Uid, cred.Gid)
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
