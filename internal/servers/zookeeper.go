package servers

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	zkStartTimeout  = 90 * time.Second
	zkQuorumTimeout = 90 * time.Second
	zkProbeTimeout  = 500 * time.Millisecond
	zkOutFileName   = "zookeeper.out" // stdout and stderr, where the server logs
	zkConfFileName  = "zoo.cfg"
	zkMainClass     = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	zkPackage       = "zookeeper"
)

// ZooKeeperMaxSessionTimeout is the longest session timeout the servers
// grant; a client asking for more is given this. The shortest is two ticks,
// 400ms.
const ZooKeeperMaxSessionTimeout = time.Minute

// ZooKeeperContainerCheck is how often the servers delete container nodes
// that had children and have none left (ZooKeeper's default is a minute).
const ZooKeeperContainerCheck = time.Second

// zkJars lists the jars a ZooKeeper server needs, as installed by the
// Debian package. zookeeper.jar names its own dependencies in its
// manifest; slf4j-simple makes the server log to stderr, and is optional.
var (
	zkJar    = "/usr/share/java/zookeeper.jar"
	zkLogJar = "/usr/share/java/slf4j-simple.jar"
)

// zkInstallHint tells the reader how to install ZooKeeper.
func zkInstallHint() string {
	return "install it with: apt-get install -y " + zkPackage
}

// lookZooKeeper returns the java executable and the class path with which
// to run a ZooKeeper server, or an error that names the Debian package to
// install.
func lookZooKeeper() (java, classpath string, err error) {
	if _, err := os.Stat(zkJar); err != nil {
		return "", "", fmt.Errorf("servers: ZooKeeper not found (%s is missing); %s", zkJar, zkInstallHint())
	}
	java, err = exec.LookPath("java")
	if err != nil {
		java = "/usr/bin/java"
		if _, err := os.Stat(java); err != nil {
			return "", "", fmt.Errorf("servers: java not found in $PATH or /usr/bin; %s", zkInstallHint())
		}
	}
	cp := []string{zkJar}
	if _, err := os.Stat(zkLogJar); err == nil {
		cp = append(cp, zkLogJar)
	}
	return java, strings.Join(cp, ":"), nil
}

// LookZooKeeper returns nil if a ZooKeeper server can be run here, and
// otherwise an error that names the Debian package to install.
func LookZooKeeper() error {
	_, _, err := lookZooKeeper()
	return err
}

// A ZooKeeper is one ZooKeeper server process listening on 127.0.0.1,
// either standalone or as a member of an [Ensemble]. Its methods are safe
// for concurrent use. The address, ports and directory stay the same
// across Kill, Stop and Restart, and so does the data: a restarted server
// keeps what it had written. Its directory holds zoo.cfg, the log
// zookeeper.out and the data directory.
type ZooKeeper struct {
	daemon
	java      string
	classpath string
	id        int    // myid; 0 for a standalone server
	conf      string // text of zoo.cfg
	peerPort  int    // quorum port; 0 for a standalone server
	elecPort  int    // leader election port; 0 for a standalone server
	tls       *zkTLS // the secure client port's settings; nil for none
	tlsPort   int    // secure client port; 0 for none
}

// newZooKeeper prepares, but does not start, a server with a new
// temporary directory and a free client port.
func newZooKeeper() (*ZooKeeper, error) {
	java, cp, err := lookZooKeeper()
	if err != nil {
		return nil, err
	}
	z := &ZooKeeper{daemon: daemon{what: "zookeeper", logs: []string{zkOutFileName}}, java: java, classpath: cp}
	z.srv = z
	if err := z.makeDir(nil); err != nil {
		return nil, err
	}
	return z, nil
}

// writeConf writes zoo.cfg and, for an ensemble member, the myid file.
// servers holds the server.N lines of the ensemble, if any.
func (z *ZooKeeper) writeConf(servers []string) error {
	data := filepath.Join(z.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	var b strings.Builder
	// A short tick makes elections and session expiry quick; the session
	// timeout may still range from 2 ticks (400ms) to a minute.
	fmt.Fprintf(&b, "tickTime=200\ninitLimit=10\nsyncLimit=5\nmaxSessionTimeout=%d\n", ZooKeeperMaxSessionTimeout.Milliseconds())
	fmt.Fprintf(&b, "dataDir=%s\n", data)
	fmt.Fprintf(&b, "clientPortAddress=127.0.0.1\nclientPort=%d\n", z.port)
	fmt.Fprintf(&b, "admin.enableServer=false\n4lw.commands.whitelist=*\n")
	if z.tls != nil {
		if err := z.tls.writeConf(&b, z.dir, z.tlsPort); err != nil {
			return err
		}
	}
	if len(servers) > 0 {
		b.WriteString("standaloneEnabled=false\n")
		for _, s := range servers {
			b.WriteString(s + "\n")
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(z.id)+"\n"), 0o644); err != nil {
			return fmt.Errorf("servers: %w", err)
		}
	}
	z.conf = b.String()
	if err := os.WriteFile(filepath.Join(z.dir, zkConfFileName), []byte(z.conf), 0o644); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	return nil
}

// LaunchZooKeeper starts a standalone ZooKeeper server on a free port and
// waits until it answers "ruok" with "imok" and "srvr" reports Mode
// standalone. If the server is not ready within about thirty seconds,
// LaunchZooKeeper stops it and returns an error that includes the tail of
// its log. The caller must Close the returned ZooKeeper.
func LaunchZooKeeper() (*ZooKeeper, error) { return launchZooKeeper(nil) }

// launchZooKeeper is LaunchZooKeeper, with a secure client port too if
// tls is not nil.
func launchZooKeeper(tls *zkTLS) (*ZooKeeper, error) {
	return launchRetrying(func() (*ZooKeeper, error) {
		z, err := newZooKeeper()
		if err != nil {
			return nil, err
		}
		if tls != nil {
			err = z.addTLS(tls)
		}
		if err == nil {
			err = z.writeConf(nil)
		}
		if err == nil {
			z.mu.Lock()
			err = z.startLocked()
			if err == nil {
				err = z.waitModeLocked(zkStartTimeout, "standalone")
			}
			if err == nil && tls != nil {
				err = z.waitTLSPortLocked()
			}
			z.mu.Unlock()
		}
		if err != nil {
			z.Close()
			return nil, err
		}
		running.add(&z.daemon)
		return z, nil
	})
}

// startLocked starts a new process and waits until it answers "ruok" and
// reports its own data directory in "conf", so that another server on the
// port is not mistaken for it. It does not wait for the server to serve
// requests. On failure the process is gone when startLocked returns.
// z.mu must be held.
func (z *ZooKeeper) startLocked() error {
	cmd := exec.Command(z.java,
		"-Xmx128m",
		"-XX:+UseSerialGC",
		"-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-Dzookeeper.jmx.log4j.disable=true",
		// Tests do not need their writes on disk, and should not wait for it.
		"-Dzookeeper.forceSync=no",
		// Reap empty container nodes every second rather than every minute,
		// so that tests meet a lock's parent coming and going.
		"-Dznode.container.checkIntervalMs="+strconv.FormatInt(ZooKeeperContainerCheck.Milliseconds(), 10),
		"-cp", z.classpath,
		zkMainClass,
		filepath.Join(z.dir, zkConfFileName),
	)
	wantDir := filepath.Join(z.dir, "data")
	return z.runLocked(cmd, zkStartTimeout, "answer ruok", func(int) error {
		if reply, err := fourLetter(z.Addr(), "ruok", zkProbeTimeout); err != nil || reply != "imok" {
			return errNotYet
		}
		conf, err := fourLetter(z.Addr(), "conf", zkProbeTimeout)
		if err != nil || !strings.HasPrefix(confValue(conf, "dataDir"), wantDir) {
			return errNotYet
		}
		return nil
	})
}

// waitModeLocked waits until srvr reports one of the modes in want, or
// any mode if want is empty. z.mu must be held.
func (z *ZooKeeper) waitModeLocked(timeout time.Duration, want ...string) error {
	return z.waitLocked(timeout, 50*time.Millisecond, fmt.Sprintf("serve as %v", want), func() error {
		reply, err := fourLetter(z.Addr(), "srvr", zkProbeTimeout)
		if err != nil {
			return errNotYet
		}
		mode := srvrMode(reply)
		if mode != "" && (len(want) == 0 || slices.Contains(want, mode)) {
			return nil
		}
		return fmt.Errorf("mode %q", mode)
	})
}

// Mode asks the server with "srvr" how it is serving and returns
// "standalone", "leader" or "follower". It returns an error if the server
// does not answer or is not serving requests, as while an ensemble has no
// quorum.
func (z *ZooKeeper) Mode() (string, error) {
	reply, err := fourLetter(z.Addr(), "srvr", 2*time.Second)
	if err != nil {
		return "", fmt.Errorf("servers: zookeeper %s: %w", z.Addr(), err)
	}
	mode := srvrMode(reply)
	if mode == "" {
		return "", fmt.Errorf("servers: zookeeper %s is not serving: %s", z.Addr(), strings.TrimSpace(reply))
	}
	return mode, nil
}

// restartLocked starts a stopped server again and waits until it serves
// requests: a standalone server as standalone, an ensemble member as
// leader or follower, which needs a quorum of the ensemble to be running.
// z.mu must be held.
func (z *ZooKeeper) restartLocked() error {
	if err := startRetrying(z.startLocked); err != nil {
		return err
	}
	return z.waitModeLocked(zkStartTimeout)
}

// RestartEmpty stops the server, deletes its data (snapshots and
// transaction logs, keeping an ensemble member's myid), and starts it again
// as Restart does: like a machine replaced with a blank disk. A standalone
// server then knows no node and no session; its clients' sessions expire
// when they reconnect. An ensemble member recovers the data from the others.
func (z *ZooKeeper) RestartEmpty() error { return z.restartWith("RestartEmpty", z.wipeLocked) }

// wipeLocked deletes the data of a stopped server: its snapshots and
// transaction logs, keeping an ensemble member's myid. z.mu must be held.
func (z *ZooKeeper) wipeLocked() error {
	data := filepath.Join(z.dir, "data")
	entries, err := os.ReadDir(data)
	if err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	for _, e := range entries {
		if e.Name() == "myid" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
			return fmt.Errorf("servers: wiping zookeeper %s: %w", z.Addr(), err)
		}
	}
	return nil
}

// FourLetter sends the four-letter word cmd ("srvr", "mntr", "wchp", ...)
// to the server and returns its reply. Every word is enabled.
func (z *ZooKeeper) FourLetter(cmd string) (string, error) {
	if len(cmd) != 4 {
		return "", fmt.Errorf("servers: %q is not a four-letter word", cmd)
	}
	return fourLetter(z.Addr(), cmd, 2*time.Second)
}

// An Ensemble is a ZooKeeper ensemble of an odd number of servers, all on
// 127.0.0.1. Servers[i] has myid i+1.
type Ensemble struct {
	Servers []*ZooKeeper
}

// LaunchEnsemble starts an ensemble of n servers, where n must be odd and
// at least 3, and waits until exactly one server is the leader and all the
// others are followers. If the ensemble does not form within about thirty
// seconds, LaunchEnsemble stops every server and returns an error that
// includes the tails of their logs. The caller must Close the returned
// Ensemble.
func LaunchEnsemble(n int) (*Ensemble, error) {
	return launchRetrying(func() (*Ensemble, error) { return launchEnsemble(n, nil) })
}

// launchEnsemble is LaunchEnsemble, with a secure client port on every
// server too if tls is not nil.
func launchEnsemble(n int, tls *zkTLS) (*Ensemble, error) {
	if n < 3 || n%2 == 0 {
		return nil, fmt.Errorf("servers: LaunchEnsemble: an ensemble needs an odd number of servers, at least 3; got %d", n)
	}
	e := &Ensemble{}
	var lines []string
	for i := range n {
		z, err := newZooKeeper()
		if err == nil {
			z.id = i + 1
			if z.peerPort, err = FreePort(); err == nil {
				z.elecPort, err = FreePort()
			}
			if err == nil && tls != nil {
				err = z.addTLS(tls)
			}
		}
		if z != nil {
			e.Servers = append(e.Servers, z)
		}
		if err != nil {
			e.Close()
			return nil, err
		}
		lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", z.id, z.peerPort, z.elecPort))
	}
	for _, z := range e.Servers {
		if err := z.writeConf(lines); err != nil {
			e.Close()
			return nil, err
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, z := range e.Servers {
		wg.Go(func() {
			z.mu.Lock()
			defer z.mu.Unlock()
			errs[i] = z.startLocked()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.Close()
		return nil, err
	}
	for _, z := range e.Servers {
		running.add(&z.daemon)
	}
	if tls != nil {
		for _, z := range e.Servers {
			z.mu.Lock()
			err := z.waitTLSPortLocked()
			z.mu.Unlock()
			if err != nil {
				e.Close()
				return nil, err
			}
		}
	}
	if err := e.waitFormed(zkQuorumTimeout); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// waitFormed waits until exactly one server is the leader and all the
// others are followers.
func (e *Ensemble) waitFormed(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var modes []string
	for {
		modes = modes[:0]
		leaders, followers := 0, 0
		for _, z := range e.Servers {
			m, err := z.Mode()
			if err != nil {
				m = "-"
			}
			modes = append(modes, m)
			switch m {
			case "leader":
				leaders++
			case "follower":
				followers++
			}
		}
		if leaders == 1 && followers == len(e.Servers)-1 {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			fmt.Fprintf(&b, "servers: ZooKeeper ensemble did not form within %v (modes %v)", timeout, modes)
			for _, z := range e.Servers {
				fmt.Fprintf(&b, "\nzookeeper %s log tail:\n%s", z.Addr(), z.LogTail(logTailLines))
			}
			return errors.New(b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addrs returns the client addresses of the servers, in order of myid.
func (e *Ensemble) Addrs() []string {
	addrs := make([]string, len(e.Servers))
	for i, z := range e.Servers {
		addrs[i] = z.Addr()
	}
	return addrs
}

// Leader returns the server that reports Mode leader. It returns an error
// if no server does, as during an election, or if more than one does.
func (e *Ensemble) Leader() (*ZooKeeper, error) {
	var leader *ZooKeeper
	for _, z := range e.Servers {
		if m, err := z.Mode(); err == nil && m == "leader" {
			if leader != nil {
				return nil, fmt.Errorf("servers: ZooKeeper ensemble has two leaders, %s and %s", leader.Addr(), z.Addr())
			}
			leader = z
		}
	}
	if leader == nil {
		return nil, errors.New("servers: ZooKeeper ensemble has no leader")
	}
	return leader, nil
}

// RestartEmpty stops every server of the ensemble (those still running
// gracefully), deletes the data of each as ZooKeeper.RestartEmpty does,
// starts them all again on the same ports and waits until the ensemble
// has formed: like an ensemble whose every machine was replaced with a
// blank disk. The new ensemble knows no node and no session, and its
// zxids start again from zero.
func (e *Ensemble) RestartEmpty() error {
	errs := make([]error, len(e.Servers))
	var wg sync.WaitGroup
	for i, z := range e.Servers {
		wg.Go(func() {
			errs[i] = z.locked("RestartEmpty", func() error {
				if err := z.stopLocked(); err != nil {
					return err
				}
				return z.wipeLocked()
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i, z := range e.Servers { // no quorum until most are up: start all, then wait
		wg.Go(func() { errs[i] = z.locked("RestartEmpty", func() error { return startRetrying(z.startLocked) }) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return e.waitFormed(zkQuorumTimeout)
}

// Close stops every server of the ensemble and removes their directories.
// Close is idempotent.
func (e *Ensemble) Close() error {
	errs := make([]error, len(e.Servers))
	var wg sync.WaitGroup
	for i, z := range e.Servers {
		wg.Go(func() { errs[i] = z.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
