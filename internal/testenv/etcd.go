package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	etcdStartTimeout = 30 * time.Second
	etcdProbeTimeout = 500 * time.Millisecond
	etcdOutFileName  = "etcd.out" // stdout and stderr, where the server logs
	etcdBinary       = "etcd"
	etcdPackage      = "etcd-server"
)

// EtcdHeartbeat and EtcdElectionTimeout are the Raft timings the servers
// run with: a cluster that loses its leader elects another within a few
// election timeouts, about a second.
const (
	EtcdHeartbeat       = 50 * time.Millisecond
	EtcdElectionTimeout = 500 * time.Millisecond
)

// LookEtcd returns the path of the etcd server binary, or an error that
// names the Debian package to install.
func LookEtcd() (string, error) {
	path, err := LookBinary(etcdBinary)
	if err != nil {
		return "", fmt.Errorf("testenv: etcd not found in $PATH, /usr/sbin or /usr/bin; install it with: apt-get install -y %s", etcdPackage)
	}
	return path, nil
}

// etcds holds every etcd server that has been started and not closed, for
// StopAll.
var etcds serverSet[*Etcd]

// An Etcd is one etcd server process listening on 127.0.0.1, either
// standalone or as a member of an [EtcdCluster]. Its methods are safe for
// concurrent use. The name, ports and directory stay the same across
// Kill, Stop and Restart, and so does the data: a restarted server keeps
// what it had written.
type Etcd struct {
	daemon
	bin      string
	name     string
	peerPort int    // peer (Raft) port
	cluster  string // the --initial-cluster value
	token    string // the --initial-cluster-token value
	// tlsPort, if not 0, is a second client port, served over TLS with
	// the certificate certFile and its key keyFile.
	tlsPort           int
	certFile, keyFile string
}

// newEtcd prepares, but does not start, a server named name with a new
// temporary directory and free client and peer ports. It runs the etcd
// binary bin, or Debian's (LookEtcd) if bin is "".
func newEtcd(name, bin string) (*Etcd, error) {
	var err error
	if bin == "" {
		if bin, err = LookEtcd(); err != nil {
			return nil, err
		}
	}
	e := &Etcd{bin: bin, name: name}
	if err = e.makeDir("testenv-etcd-", nil); err != nil {
		return nil, err
	}
	if e.peerPort, err = FreePort(); err != nil {
		os.RemoveAll(e.dir)
		return nil, err
	}
	return e, nil
}

// peerURL returns the URL on which the server talks to its peers.
func (e *Etcd) peerURL() string { return "http://127.0.0.1:" + strconv.Itoa(e.peerPort) }

// clientURL returns the URL on which the server serves clients.
func (e *Etcd) clientURL() string { return "http://" + e.Addr() }

// startLocked starts the server process and waits until it is up: its
// client port answers /health, which for a cluster member needs a
// leader, so a member waits for a quorum of its cluster. e.mu must be
// held.
func (e *Etcd) startLocked() error {
	return e.startWaitLocked(true)
}

// startWaitLocked starts the server process and, if wait, waits until it
// reports itself healthy. e.mu must be held.
func (e *Etcd) startWaitLocked(wait bool) error {
	listen := e.clientURL()
	var tlsArgs []string
	if e.tlsPort != 0 {
		listen += ",https://" + e.TLSAddr()
		tlsArgs = []string{"--cert-file", e.certFile, "--key-file", e.keyFile}
	}
	cmd := exec.Command(e.bin, append([]string{
		"--name", e.name,
		"--data-dir", filepath.Join(e.dir, "data"),
		"--listen-client-urls", listen,
		"--advertise-client-urls", e.clientURL(),
		"--listen-peer-urls", e.peerURL(),
		"--initial-advertise-peer-urls", e.peerURL(),
		"--initial-cluster", e.cluster,
		"--initial-cluster-token", e.token,
		"--initial-cluster-state", "new", // ignored once the data directory exists
		"--heartbeat-interval", strconv.FormatInt(EtcdHeartbeat.Milliseconds(), 10),
		"--election-timeout", strconv.FormatInt(EtcdElectionTimeout.Milliseconds(), 10),
		"--logger", "zap",
		"--log-outputs", "stderr",
	}, tlsArgs...)...) // the v2 API is off by default in 3.4, and gone in 3.6
	cmd.Dir = e.dir
	p, err := startProcess(cmd, filepath.Join(e.dir, etcdOutFileName), "etcd")
	if err != nil {
		return err
	}
	e.proc = p
	if !wait {
		return nil
	}
	return e.waitHealthyLocked(etcdStartTimeout)
}

// waitHealthyLocked waits until the running process answers /health with
// health true. e.mu must be held.
func (e *Etcd) waitHealthyLocked(timeout time.Duration) error {
	p := e.proc
	return p.poll(timeout, 20*time.Millisecond, e.health, func() error {
		return e.exitError(p)
	}, func(last error) error {
		return fmt.Errorf("testenv: etcd %s (pid %d) not healthy within %v (%v); log tail:\n%s",
			e.Addr(), p.cmd.Process.Pid, timeout, last, e.LogTail(logTailLines))
	})
}

// exitError describes p, which exited before it was ready, matching
// errAddrInUse if it could not bind a port.
func (e *Etcd) exitError(p *process) error {
	tail := e.LogTail(logTailLines)
	err := p.exitError("etcd on "+e.Addr(), tail)
	if strings.Contains(tail, "address already in use") && !errors.Is(err, errAddrInUse) {
		err = fmt.Errorf("%w: %w", err, errAddrInUse)
	}
	return err
}

// Addr returns the server's client address, "127.0.0.1:port", which is
// what an etcd client takes as an endpoint.
func (e *Etcd) Addr() string { return e.addr() }

// Name returns the member's name, "etcd1", "etcd2", ... in a cluster and
// "etcd" for a standalone server.
func (e *Etcd) Name() string { return e.name }

// Dir returns the server's directory, which holds the log etcd.out and
// the data directory.
func (e *Etcd) Dir() string { return e.dir }

// PID returns the process ID of the running server, or 0 if it is not
// running.
func (e *Etcd) PID() int { return e.pid() }

// Health returns nil if the server answers /health with health true,
// which it does when it is serving and its cluster has a leader.
func (e *Etcd) Health() error { return e.health() }

// Status asks the server for its maintenance status.
func (e *Etcd) Status() (EtcdStatus, error) { return e.status() }

// IsLeader reports whether the server is its cluster's leader. It
// returns an error if the server does not answer.
func (e *Etcd) IsLeader() (bool, error) {
	st, err := e.status()
	if err != nil {
		return false, err
	}
	return st.Leader != 0 && st.Leader == st.MemberID, nil
}

// Kill sends SIGKILL to the server and waits for it to exit, like
// kill -9. It does nothing if the server is not running.
func (e *Etcd) Kill() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.proc.kill("etcd " + e.Addr())
}

// Stop stops the server gracefully: it sends SIGTERM, waits up to five
// seconds and then sends SIGKILL. It does nothing if the server is not
// running. A paused server is resumed so that it can shut down.
func (e *Etcd) Stop() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopLocked()
}

func (e *Etcd) stopLocked() error { return e.proc.stop("etcd " + e.Addr()) }

// Pause freezes the server with SIGSTOP. Connections stay open, but it
// answers nothing, and takes no part in its cluster, until Resume.
func (e *Etcd) Pause() error { return e.signalProc("etcd "+e.Addr(), syscall.SIGSTOP, true) }

// Resume continues a paused server with SIGCONT.
func (e *Etcd) Resume() error { return e.signalProc("etcd "+e.Addr(), syscall.SIGCONT, false) }

// Restart starts the server again on the same ports and directory,
// stopping it first if it is running, and waits until it is healthy,
// which for a cluster member needs a quorum of the cluster to be running.
// Restart retries for a few seconds while a port is still in use.
func (e *Etcd) Restart() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("testenv: Restart of closed etcd %s", e.Addr())
	}
	if err := e.stopLocked(); err != nil {
		return err
	}
	if err := e.restartLocked(false); err != nil {
		return err
	}
	return e.waitHealthyLocked(etcdStartTimeout)
}

// restartLocked starts a stopped server again, retrying while a port is
// in use, and waits until it is healthy if wait. e.mu must be held.
func (e *Etcd) restartLocked(wait bool) error {
	err := startRetrying(func() error {
		err := e.startWaitLocked(false)
		if err == nil {
			// A port still held by the last process shows as an early exit.
			time.Sleep(50 * time.Millisecond)
			if !e.proc.running() {
				err = e.exitError(e.proc)
			}
		}
		return err
	})
	if err != nil || !wait {
		return err
	}
	return e.waitHealthyLocked(etcdStartTimeout)
}

// RestartEmpty stops the server, deletes its data and starts it again as
// Restart does: like a machine replaced with a blank disk. Only a
// standalone server can: a cluster member with no data could not rejoin.
// The new server knows no key and no lease, and its revisions start again
// from 1.
func (e *Etcd) RestartEmpty() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("testenv: RestartEmpty of closed etcd %s", e.Addr())
	}
	if strings.Contains(e.cluster, ",") {
		return fmt.Errorf("testenv: RestartEmpty of etcd %s, a cluster member", e.Addr())
	}
	if err := e.stopLocked(); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(e.dir, "data")); err != nil {
		return fmt.Errorf("testenv: wiping etcd %s: %w", e.Addr(), err)
	}
	return e.restartLocked(true)
}

// Close stops the server and removes its directory. Close is idempotent.
func (e *Etcd) Close() error { return e.close(e.stopLocked, func() { etcds.remove(e) }, true) }

// LogTail returns the last n lines of the server's output, where it logs.
func (e *Etcd) LogTail(n int) string { return e.logTail(etcdOutFileName, n) }

// LaunchEtcd starts a standalone etcd server (a cluster of one) on free
// client and peer ports and waits until it is healthy. If the server is
// not ready within about thirty seconds, LaunchEtcd stops it and returns
// an error that includes the tail of its log. The caller must Close the
// returned Etcd.
func LaunchEtcd() (*Etcd, error) {
	return launchRetrying(func() (*Etcd, error) {
		e, err := newEtcd("etcd", "")
		if err != nil {
			return nil, err
		}
		e.cluster = e.name + "=" + e.peerURL()
		e.token = filepath.Base(e.dir)
		e.mu.Lock()
		err = e.startLocked()
		e.mu.Unlock()
		if err != nil {
			e.Close()
			return nil, err
		}
		etcds.add(e)
		return e, nil
	})
}

// LaunchEtcdTLS starts a standalone server as LaunchEtcd does, which also
// serves clients over TLS on a second port (see TLSAddr), with the server
// certificate certFile and its key keyFile, such as those of Certs. The
// plain client port stays open, for the probes and tests that need no
// TLS. The caller must Close the returned Etcd.
func LaunchEtcdTLS(certFile, keyFile string) (*Etcd, error) {
	return launchRetrying(func() (*Etcd, error) {
		e, err := newEtcd("etcd", "")
		if err != nil {
			return nil, err
		}
		if e.tlsPort, err = FreePort(); err != nil {
			e.Close()
			return nil, err
		}
		e.certFile, e.keyFile = certFile, keyFile
		e.cluster = e.name + "=" + e.peerURL()
		e.token = filepath.Base(e.dir)
		e.mu.Lock()
		err = e.startLocked()
		e.mu.Unlock()
		if err != nil {
			e.Close()
			return nil, err
		}
		etcds.add(e)
		return e, nil
	})
}

// StartEtcdTLS starts a server as LaunchEtcdTLS does, for the test t, as
// StartEtcd does.
func StartEtcdTLS(t testing.TB, certFile, keyFile string) *Etcd {
	t.Helper()
	return startForTest(t, "etcd", "needs an etcd server", lookEtcd, func() (*Etcd, error) { return LaunchEtcdTLS(certFile, keyFile) })
}

// TLSAddr returns the host:port of the server's TLS client port, or "" if
// it has none (LaunchEtcdTLS).
func (e *Etcd) TLSAddr() string {
	if e.tlsPort == 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(e.tlsPort)
}

// StartEtcd starts a standalone server as LaunchEtcd does and closes it
// when the test and its subtests complete. If the test has failed by
// then, the tail of the server's log is written with t.Log. StartEtcd
// skips the test under -short and if etcd is not installed (or fails it
// when the CI environment variable is "true" or "1"), and fails it if the
// server does not start.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return startForTest(t, "etcd", "needs an etcd server", lookEtcd, LaunchEtcd)
}

// requireEtcd skips the test if etcd is not installed, or fails it when
// the CI environment variable is "true" or "1".
func requireEtcd(t testing.TB) {
	t.Helper()
	require(t, lookEtcd())
}

// lookEtcd returns nil if etcd is installed, and otherwise LookEtcd's
// error.
func lookEtcd() error {
	_, err := LookEtcd()
	return err
}
