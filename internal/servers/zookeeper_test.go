package servers

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkExpectDead registers, before any server is started, a cleanup that
// runs after the servers are closed and checks that every process they
// ever had is gone.
func zkExpectDead(t *testing.T, servers func() []*ZooKeeper) {
	t.Helper()
	t.Cleanup(func() {
		for _, z := range servers() {
			z.mu.Lock()
			pids := append([]int(nil), z.pids...)
			z.mu.Unlock()
			for _, pid := range pids {
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("zookeeper %s: java pid %d still exists after Close (kill 0: %v)", z.Addr(), pid, err)
				}
			}
		}
	})
}

func TestZooKeeperLaunchEnsembleRejectsBadSize(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 2, 4} {
		e, err := LaunchEnsemble(n)
		if err == nil {
			e.Close()
			t.Fatalf("LaunchEnsemble(%d) succeeded", n)
		}
		if !strings.Contains(err.Error(), "odd number") {
			t.Errorf("LaunchEnsemble(%d) error = %v", n, err)
		}
	}
}

func TestZooKeeperSrvrMode(t *testing.T) {
	reply := "Zookeeper version: 3.8.0\nLatency min/avg/max: 0/0.0/0\nMode: follower\nNode count: 5\n"
	if got := srvrMode(reply); got != "follower" {
		t.Errorf("srvrMode = %q, want follower", got)
	}
	if got := srvrMode("This ZooKeeper instance is not currently serving requests\n"); got != "" {
		t.Errorf("srvrMode of not serving = %q, want empty", got)
	}
}

func TestIntegrationZooKeeperStandalone(t *testing.T) {
	t.Parallel()
	var z *ZooKeeper
	zkExpectDead(t, func() []*ZooKeeper {
		if z == nil {
			return nil
		}
		return []*ZooKeeper{z}
	})
	start := time.Now()
	z = startZooKeeper(t)
	t.Logf("standalone ready in %v at %s (pid %d)", time.Since(start).Round(time.Millisecond), z.Addr(), z.PID())

	if !strings.HasPrefix(z.Addr(), "127.0.0.1:") {
		t.Errorf("Addr = %q", z.Addr())
	}
	if reply, err := fourLetter(z.Addr(), "ruok", time.Second); err != nil || reply != "imok" {
		t.Fatalf("ruok = %q, %v; want imok", reply, err)
	}
	if m, err := z.Mode(); err != nil || m != "standalone" {
		t.Fatalf("Mode = %q, %v; want standalone", m, err)
	}

	old := z.PID()
	if err := z.Kill(); err != nil {
		t.Fatal(err)
	}
	if z.PID() != 0 {
		t.Errorf("PID after Kill = %d, want 0", z.PID())
	}
	if err := syscall.Kill(old, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d alive after Kill: %v", old, err)
	}
	if _, err := z.Mode(); err == nil {
		t.Error("Mode succeeded after Kill")
	}
	start = time.Now()
	if err := z.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("standalone restarted in %v", time.Since(start).Round(time.Millisecond))
	if z.PID() == 0 || z.PID() == old {
		t.Errorf("PID after Restart = %d (old %d)", z.PID(), old)
	}
	if m, err := z.Mode(); err != nil || m != "standalone" {
		t.Fatalf("Mode after Restart = %q, %v; want standalone", m, err)
	}

	if err := z.Pause(); err != nil {
		t.Fatal(err)
	}
	if reply, err := fourLetter(z.Addr(), "ruok", 300*time.Millisecond); err == nil && reply == "imok" {
		t.Error("paused server answered ruok")
	}
	if err := z.Resume(); err != nil {
		t.Fatal(err)
	}
	if m, err := z.Mode(); err != nil || m != "standalone" {
		t.Fatalf("Mode after Resume = %q, %v; want standalone", m, err)
	}

	if err := z.Stop(); err != nil {
		t.Fatal(err)
	}
	if z.PID() != 0 {
		t.Errorf("PID after Stop = %d, want 0", z.PID())
	}
	if err := z.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := z.Restart(); err == nil {
		t.Error("Restart after Close succeeded")
	}
}

// waitNewLeader waits until a server other than old is the only leader.
func waitNewLeader(t *testing.T, e *Ensemble, old *ZooKeeper, timeout time.Duration) *ZooKeeper {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, err := e.Leader()
		if err == nil && l != old {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new leader within %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestIntegrationZooKeeperEnsemble(t *testing.T) {
	t.Parallel()
	var e *Ensemble
	zkExpectDead(t, func() []*ZooKeeper {
		if e == nil {
			return nil
		}
		return e.Servers
	})
	start := time.Now()
	e = startEnsemble(t, 3)
	t.Logf("3-node ensemble formed in %v: %v", time.Since(start).Round(time.Millisecond), e.Addrs())

	if got := len(e.Addrs()); got != 3 {
		t.Fatalf("len(Addrs) = %d", got)
	}
	leader, err := e.Leader()
	if err != nil {
		t.Fatal(err)
	}
	followers := 0
	for _, z := range e.Servers {
		m, err := z.Mode()
		if err != nil {
			t.Fatal(err)
		}
		if m == "follower" {
			followers++
		}
	}
	if followers != 2 {
		t.Fatalf("%d followers, want 2", followers)
	}

	// kill -9 the leader: the other two elect a new one.
	start = time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	newLeader := waitNewLeader(t, e, leader, 10*time.Second)
	t.Logf("new leader %s elected %v after kill -9 of %s", newLeader.Addr(), time.Since(start).Round(time.Millisecond), leader.Addr())

	// The old leader comes back as a follower.
	start = time.Now()
	if err := leader.Restart(); err != nil {
		t.Fatal(err)
	}
	if m, err := leader.Mode(); err != nil || m != "follower" {
		t.Fatalf("old leader Mode after Restart = %q, %v; want follower", m, err)
	}
	t.Logf("old leader rejoined as follower in %v", time.Since(start).Round(time.Millisecond))

	// Pause a follower: the leader keeps its quorum; Resume: it serves again.
	var follower *ZooKeeper
	for _, z := range e.Servers {
		if z != newLeader {
			follower = z
			break
		}
	}
	if err := follower.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := fourLetter(follower.Addr(), "ruok", 300*time.Millisecond); err == nil {
		t.Error("paused follower answered ruok")
	}
	if l, err := e.Leader(); err != nil || l != newLeader {
		t.Errorf("Leader with a paused follower = %v, %v; want %s", l, err, newLeader.Addr())
	}
	if err := follower.Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := follower.Mode()
		if err == nil && m == "follower" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("resumed follower Mode = %q, %v", m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, z := range e.Servers {
		if z.PID() != 0 {
			t.Errorf("%s PID after Close = %d", z.Addr(), z.PID())
		}
	}
}

// Restart keeps a server's nodes; RestartEmpty loses them. A client that
// saw the old data is refused by the blank server ("it has seen zxid ...
// our last zxid is 0x0"), as ZooKeeper refuses any client that is ahead of
// it; a new client is served.
func TestIntegrationZooKeeperRestartEmpty(t *testing.T) {
	t.Parallel()
	z := startZooKeeper(t)
	connect := func() *zk.Conn {
		t.Helper()
		// A session timeout that outlasts a restart on a loaded machine
		// (the JVM took several seconds with two make test runs beside it).
		conn, _, err := zk.Connect([]string{z.Addr()}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		return conn
	}
	exists := func(conn *zk.Conn, timeout time.Duration) (bool, error) {
		t.Helper()
		for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
			ok, _, err := conn.Exists("/kept")
			if err == nil || time.Now().After(deadline) {
				return ok, err
			}
		}
	}
	old := connect()
	if _, err := old.Create("/kept", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := z.Restart(); err != nil {
		t.Fatal(err)
	}
	// A new session looks: the old one may have expired meanwhile on a
	// loaded machine (a restart beside two make tests outlasted its 10s).
	if ok, err := exists(connect(), 30*time.Second); !ok || err != nil {
		t.Fatalf("after a plain Restart: Exists = %v, %v; want the node kept", ok, err)
	}
	if err := z.RestartEmpty(); err != nil {
		t.Fatal(err)
	}
	if ok, err := exists(connect(), 30*time.Second); ok || err != nil {
		t.Fatalf("after RestartEmpty: Exists = %v, %v; want no node", ok, err)
	}
	if _, err := exists(old, time.Second); err == nil {
		t.Error("the blank server served a client that had seen its old data")
	}
	if reply, err := z.FourLetter("mntr"); err != nil || !strings.Contains(reply, "zk_server_state\tstandalone") {
		t.Errorf("FourLetter(mntr) = %q, %v", reply, err)
	}
	if _, err := z.FourLetter("ruok!"); err == nil {
		t.Error("FourLetter accepted a five-letter word")
	}
}

// Ensemble.RestartEmpty brings back, after kill -9 of every member, an
// ensemble that has formed again and knows none of the old nodes.
func TestIntegrationZooKeeperEnsembleRestartEmpty(t *testing.T) {
	t.Parallel()
	e := startEnsemble(t, 3)
	conn, _, err := zk.Connect(e.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create("/kept", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	for _, z := range e.Servers {
		if err := z.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.RestartEmpty(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Leader(); err != nil {
		t.Fatalf("after RestartEmpty: %v", err)
	}
	fresh, _, err := zk.Connect(e.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	var ok bool
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ok, _, err = fresh.Exists("/kept"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if ok || err != nil {
		t.Fatalf("after RestartEmpty: Exists = %v, %v; want no node", ok, err)
	}
}
