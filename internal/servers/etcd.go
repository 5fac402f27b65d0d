package servers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	etcdStartTimeout = 90 * time.Second
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
		return "", fmt.Errorf("servers: etcd not found in $PATH, /usr/sbin or /usr/bin; install it with: apt-get install -y %s", etcdPackage)
	}
	return path, nil
}

// An Etcd is one etcd server process listening on 127.0.0.1, either
// standalone or as a member of an [EtcdCluster]. Its methods are safe for
// concurrent use. The name, ports and directory stay the same across
// Kill, Stop and Restart, and so does the data: a restarted server keeps
// what it had written. Its directory holds the log etcd.out and the data
// directory.
type Etcd struct {
	daemon
	bin      string
	member   string // the member's name
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
	e := &Etcd{daemon: daemon{what: "etcd", logs: []string{etcdOutFileName}}, bin: bin, member: name}
	e.srv = e
	if err = e.makeDir(nil); err != nil {
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
		"--name", e.member,
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
	if !wait {
		return e.runLocked(cmd, 0, "", nil)
	}
	return e.runLocked(cmd, etcdStartTimeout, "become healthy", func(int) error { return e.health() })
}

// waitHealthyLocked waits until the running process answers /health with
// health true. e.mu must be held.
func (e *Etcd) waitHealthyLocked(timeout time.Duration) error {
	return e.waitLocked(timeout, 20*time.Millisecond, "become healthy", e.health)
}

// Name returns the member's name, "etcd1", "etcd2", ... in a cluster and
// "etcd" for a standalone server.
func (e *Etcd) Name() string { return e.member }

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

// restartLocked starts a stopped server again and waits until it is
// healthy, which for a cluster member needs a quorum of the cluster to be
// running. e.mu must be held.
func (e *Etcd) restartLocked() error { return e.startAgainLocked(true) }

// startAgainLocked starts a stopped server again, retrying while a port is
// in use, and waits until it is healthy if wait. e.mu must be held.
func (e *Etcd) startAgainLocked(wait bool) error {
	err := startRetrying(func() error {
		err := e.startWaitLocked(false)
		if err == nil {
			// A port still held by the last process shows as an early exit.
			time.Sleep(50 * time.Millisecond)
			if !e.proc.running() {
				err = e.proc.exitError(e.name(), e.LogTail)
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
	if strings.Contains(e.cluster, ",") {
		return fmt.Errorf("servers: RestartEmpty of %s, a cluster member", e.name())
	}
	return e.restartWith("RestartEmpty", func() error {
		if err := os.RemoveAll(filepath.Join(e.dir, "data")); err != nil {
			return fmt.Errorf("servers: wiping %s: %w", e.name(), err)
		}
		return nil
	})
}

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
		e.cluster = e.member + "=" + e.peerURL()
		e.token = filepath.Base(e.dir)
		e.mu.Lock()
		err = e.startLocked()
		e.mu.Unlock()
		if err != nil {
			e.Close()
			return nil, err
		}
		running.add(&e.daemon)
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
		e.cluster = e.member + "=" + e.peerURL()
		e.token = filepath.Base(e.dir)
		e.mu.Lock()
		err = e.startLocked()
		e.mu.Unlock()
		if err != nil {
			e.Close()
			return nil, err
		}
		running.add(&e.daemon)
		return e, nil
	})
}

// TLSAddr returns the host:port of the server's TLS client port, or "" if
// it has none (LaunchEtcdTLS).
func (e *Etcd) TLSAddr() string {
	if e.tlsPort == 0 {
		return ""
	}
	return "127.0.0.1:" + strconv.Itoa(e.tlsPort)
}
