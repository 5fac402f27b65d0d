package servers

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// processGone reports whether pid no longer exists.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestIntegrationStartStop(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{})
	if got, err := r.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING = %q, %v", got, err)
	}
	if !strings.HasPrefix(r.Addr(), "127.0.0.1:") || r.Port() == 0 || r.Dir() == "" {
		t.Fatalf("Addr %q, Port %d, Dir %q", r.Addr(), r.Port(), r.Dir())
	}
	if got, err := r.Do("RPUSH", "l", "a", "b"); err != nil || got != "2" {
		t.Fatalf("RPUSH = %q, %v", got, err)
	}
	if got, err := r.Do("LRANGE", "l", "0", "-1"); err != nil || got != "a\nb" {
		t.Fatalf("LRANGE = %q, %v", got, err)
	}
	if got, err := r.Do("GET", "missing"); err != nil || got != "" {
		t.Fatalf("GET missing = %q, %v", got, err)
	}
	if _, err := r.Do("INCR", "l"); err == nil || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
		t.Fatalf("INCR on a list: %v", err)
	}
	pid := r.PID()
	if pid == 0 {
		t.Fatal("PID() = 0 while running")
	}
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if r.PID() != 0 || !processGone(pid) {
		t.Fatalf("process %d still exists after Stop", pid)
	}
	if _, err := r.Do("PING"); err == nil {
		t.Fatal("PING succeeded after Stop")
	}
	if err := r.Pause(); err == nil {
		t.Fatal("Pause of a stopped server succeeded")
	}
	dir := r.Dir()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
	if _, err := syscall.Open(dir, syscall.O_RDONLY, 0); err == nil {
		t.Fatalf("temporary directory %s survived Close", dir)
	}
}

func TestIntegrationRestartWithoutPersistence(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{})
	addr := r.Addr()
	if _, err := r.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	pid := r.PID()
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Fatalf("process %d still exists after Kill", pid)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if r.Addr() != addr || r.PID() == pid || r.PID() == 0 {
		t.Fatalf("after Restart: Addr %s (was %s), PID %d (was %d)", r.Addr(), addr, r.PID(), pid)
	}
	if got, err := r.Do("GET", "k"); err != nil || got != "" {
		t.Fatalf("GET after kill and restart = %q, %v; want empty", got, err)
	}
}

func TestIntegrationRestartWithPersistence(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{Persistence: true})
	if _, err := r.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET after kill -9 and restart = %q, %v; want \"v\"", got, err)
	}
	// Restart while running stops the server first.
	if _, err := r.Do("SET", "k2", "v2"); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Do("GET", "k2"); err != nil || got != "v2" {
		t.Fatalf("GET after restart = %q, %v; want \"v2\"", got, err)
	}
}

func TestIntegrationPauseResume(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{})
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.do(300*time.Millisecond, "PING"); err == nil || !isTimeout(errors.Unwrap(err)) {
		t.Fatalf("PING while paused: %v; want a timeout", err)
	}
	if err := r.Resume(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after Resume = %q, %v", got, err)
	}
	// Stop must work on a paused server, too.
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Stop of a paused server took %v", d)
	}
}

func TestIntegrationRequirePass(t *testing.T) {
	t.Parallel()
	var logged []string
	r := startRedis(t, RedisConfig{
		Args: []string{"--requirepass", "s3cret"},
		Log:  func(s string) { logged = append(logged, s) },
	})
	if got, err := r.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING with password = %q, %v", got, err)
	}
	v, err := roundTrip(r.Addr(), "", time.Second, []string{"GET", "x"})
	if e, ok := v.(redisError); err != nil || !ok || !strings.HasPrefix(string(e), "NOAUTH") {
		t.Fatalf("GET without password = %v, %v; want NOAUTH", v, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if len(logged) == 0 || !strings.Contains(strings.Join(logged, "\n"), "Ready to accept connections") {
		t.Fatalf("Log received %q", logged)
	}
}

func TestIntegrationLaunchFailure(t *testing.T) {
	skipIfShort(t, "needs redis-server")
	t.Parallel()
	requireBinary(t, "redis-server")
	var logged []string
	_, err := LaunchRedis(RedisConfig{
		Args: []string{"--no-such-option", "1"},
		Log:  func(s string) { logged = append(logged, s) },
	})
	if err == nil {
		t.Fatal("LaunchRedis with a bad option succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("error does not include the log tail: %v", err)
	}
	if len(logged) == 0 {
		t.Fatal("Log was not called on failure")
	}
}

func TestIntegrationExplicitPortAndDir(t *testing.T) {
	t.Parallel()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := startRedis(t, RedisConfig{Port: port, Dir: dir})
	if r.Port() != port || r.Dir() != dir {
		t.Fatalf("Port %d Dir %s; want %d %s", r.Port(), r.Dir(), port, dir)
	}
	// A second server on the same port must fail rather than adopt the first.
	if _, err := LaunchRedis(RedisConfig{Port: port}); err == nil {
		t.Fatal("second server on a busy port started")
	}
}

func TestIntegrationStartRedisN(t *testing.T) {
	t.Parallel()
	rs := startRedisN(t, 3, RedisConfig{})
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.Addr()] {
			t.Fatalf("duplicate address %s", r.Addr())
		}
		seen[r.Addr()] = true
		if _, err := r.Do("SET", "who", r.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range rs {
		if got, _ := r.Do("GET", "who"); got != r.Addr() {
			t.Fatalf("servers are not independent: %s has who=%s", r.Addr(), got)
		}
	}
}

func TestIntegrationStopAll(t *testing.T) {
	skipIfShort(t, "needs redis-server")
	requireBinary(t, "redis-server")
	// Not parallel: StopAll stops every server in the process.
	r, err := LaunchRedis(RedisConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pid := r.PID()
	if err := StopAll(); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Fatalf("process %d survived StopAll", pid)
	}
	if err := r.Restart(); err == nil {
		t.Fatal("Restart after StopAll succeeded")
	}
}

func TestIntegrationCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	if len(c.Nodes) != 3 || len(c.Addrs()) != 3 {
		t.Fatalf("cluster has %d nodes", len(c.Nodes))
	}
	for _, n := range c.Nodes {
		info, err := n.Do("CLUSTER", "INFO")
		if err != nil {
			t.Fatal(err)
		}
		if infoField(info, "cluster_state") != "ok" || infoField(info, "cluster_slots_assigned") != "16384" {
			t.Fatalf("%s CLUSTER INFO:\n%s", n.Addr(), info)
		}
	}
	owners := map[int]bool{}
	for i := range 20 {
		key := fmt.Sprintf("key-%d", i)
		s, err := c.Nodes[0].Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			t.Fatal(err)
		}
		slot, _ := strconv.Atoi(s)
		owner := -1
		for j := range c.Nodes {
			if first, last := slotRange(j, len(c.Nodes)); slot >= first && slot <= last {
				owner = j
			}
		}
		owners[owner] = true
		if got, err := c.Nodes[owner].Do("SET", key, "v"); err != nil || got != "OK" {
			t.Fatalf("SET %s (slot %d) on owner %s = %q, %v", key, slot, c.Nodes[owner].Addr(), got, err)
		}
		other := c.Nodes[(owner+1)%len(c.Nodes)]
		if _, err := other.Do("GET", key); err == nil || !strings.HasPrefix(err.Error(), "MOVED "+s+" "+c.Nodes[owner].Addr()) {
			t.Fatalf("GET %s on non-owner %s: %v; want MOVED", key, other.Addr(), err)
		}
	}
	if len(owners) != 3 {
		t.Fatalf("keys landed on %d nodes, want 3", len(owners))
	}
}

// respConn is a client connection kept open across commands, for proxy
// tests.
type respConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dialRESP(t *testing.T, addr string) *respConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &respConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
}

// ping sends PING and waits up to timeout for PONG.
func (rc *respConn) ping(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	rc.c.SetDeadline(start.Add(timeout))
	if err := writeCommand(rc.w, []string{"PING"}); err != nil {
		return 0, err
	}
	v, err := readReply(rc.r)
	if err != nil {
		return 0, err
	}
	if v != "PONG" {
		return 0, fmt.Errorf("PING replied %v", v)
	}
	return time.Since(start), nil
}

func TestIntegrationProxyPassThroughAndLatency(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{})
	p := startProxy(t, r.Addr())
	rc := dialRESP(t, p.Addr())
	if _, err := rc.ping(2 * time.Second); err != nil {
		t.Fatalf("PING through proxy: %v", err)
	}
	p.SetLatency(50 * time.Millisecond)
	d, err := rc.ping(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if d < 100*time.Millisecond {
		t.Fatalf("PING with 50ms latency each way took %v, want >= 100ms", d)
	}
	p.SetLatency(0)
	var best time.Duration = time.Hour
	for range 5 {
		d, err := rc.ping(2 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		best = min(best, d)
	}
	if best >= 50*time.Millisecond {
		t.Fatalf("PING after removing latency took %v", best)
	}
}

func TestIntegrationProxyBlackhole(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{})
	p := startProxy(t, r.Addr())
	existing := dialRESP(t, p.Addr())
	if _, err := existing.ping(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	if _, err := existing.ping(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("PING on existing connection while blackholed: %v; want a timeout", err)
	}
	fresh := dialRESP(t, p.Addr())
	if _, err := fresh.ping(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("PING on new connection while blackholed: %v; want a timeout", err)
	}
	p.Blackhole(false)
	if _, err := dialRESP(t, p.Addr()).ping(2 * time.Second); err != nil {
		t.Fatalf("PING on new connection after Blackhole(false): %v", err)
	}
}

func TestIntegrationProxyReset(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{})
	p := startProxy(t, r.Addr())
	rc := dialRESP(t, p.Addr())
	if _, err := rc.ping(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	if _, err := rc.ping(2 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("PING on a reset connection: %v; want a reset or EOF", err)
	}
	if _, err := dialRESP(t, p.Addr()).ping(2 * time.Second); err != nil {
		t.Fatalf("PING on new connection after Reset: %v", err)
	}
	// Killing the target breaks proxied connections but not the proxy.
	rc2 := dialRESP(t, p.Addr())
	if _, err := rc2.ping(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := rc2.ping(2 * time.Second); err == nil {
		t.Fatal("PING through proxy succeeded with the target killed")
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := dialRESP(t, p.Addr()).ping(2 * time.Second); err != nil {
		t.Fatalf("PING after target restart: %v", err)
	}
}

// A connection accepted before SetRefuse(true) and Reset, whose link to
// the target was not yet registered when Reset ran, is reset too: it once
// went on forwarding, and a test's "every server refuses" let a client
// through. Not parallel: it sets the package's beforeLink hook.
func TestIntegrationProxyResetWhileLinking(t *testing.T) {
	r := startRedis(t, RedisConfig{})
	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	beforeLink = func() { once.Do(func() { close(entered); <-proceed }) }
	p := startProxy(t, r.Addr())
	t.Cleanup(func() { p.Close(); beforeLink = nil })
	rc := dialRESP(t, p.Addr())
	<-entered
	p.SetRefuse(true)
	p.Reset()
	close(proceed)
	if _, err := rc.ping(2 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("PING on a connection that was linking when Reset ran: %v; want a reset or EOF", err)
	}
}

// TestIntegrationProxySubMillisecondLatency checks that a delay below the
// runtime timers' millisecond is kept: 0.5ms each way adds about 1ms to a
// PING, not 2ms. The best of 50 PINGs is compared, which load lengthens
// only if it slows every one of them.
func TestIntegrationProxySubMillisecondLatency(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{})
	p := startProxy(t, r.Addr())
	rc := dialRESP(t, p.Addr())
	best := func() time.Duration {
		b := time.Hour
		for range 50 {
			d, err := rc.ping(2 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			b = min(b, d)
		}
		return b
	}
	base := best()
	p.SetLatency(500 * time.Microsecond)
	added := best() - base
	// The lower bound allows for a best PING without the delay that load
	// lengthened (146µs, when 998µs were added): what it checks is that
	// both halves of the delay are there, which 0.9ms still tells.
	if added < 900*time.Microsecond || added > 1500*time.Microsecond {
		t.Fatalf("0.5ms each way added %v to the best PING (%v without), want 0.9ms to 1.5ms", added, base)
	}
	t.Logf("0.5ms each way added %v to the best PING (%v without)", added, base)
}

// TestIntegrationProxyRequests checks that Requests counts round trips,
// not commands: two PINGs one after the other are two, two PINGs sent
// together are one.
func TestIntegrationProxyRequests(t *testing.T) {
	t.Parallel()
	r := startRedis(t, RedisConfig{})
	p := startProxy(t, r.Addr())
	rc := dialRESP(t, p.Addr())
	for range 2 {
		if _, err := rc.ping(2 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Requests(); n != 2 {
		t.Fatalf("two PINGs in turn: Requests = %d, want 2", n)
	}
	rc.c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := rc.c.Write([]byte("*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n")); err != nil { // one write
		t.Fatal(err)
	}
	for range 2 {
		if v, err := readReply(rc.r); err != nil || v != "PONG" {
			t.Fatalf("pipelined PING: %v, %v", v, err)
		}
	}
	if n := p.Requests(); n != 3 {
		t.Fatalf("then two PINGs together: Requests = %d, want 3", n)
	}
}
