package servers

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFreePortDistinct(t *testing.T) {
	seen := make(map[int]bool)
	for range 50 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port <= 0 || port > 65535 {
			t.Fatalf("FreePort() = %d", port)
		}
		if seen[port] {
			t.Fatalf("FreePort returned %d twice", port)
		}
		seen[port] = true
	}
}

// TestFreePortStaysClaimed checks that a port FreePort handed out is out of
// the kernel's ephemeral range (no outgoing connection or listener on port 0
// takes it while its server is stopped for an outage) and that its lock
// file refuses every other claimant (flock locks belong to an open file, so
// a second open in this process stands for another test process).
func TestFreePortStaysClaimed(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	checkClaimed(t, port)
}

// TestProxyPortStaysClaimed checks that a closed proxy's port stays
// claimed as FreePort's are: no other test process's server takes it, so
// a client of the closed proxy meets a refused connection. (The proxy
// listened on port 0, in the ephemeral range: in redislock's
// TestIntegrationReleaseUnreachableIsUnavailable/Mutex/Refused, another
// process's redis-server bound the closed proxy's port while go-redis
// retried its dial, and answered the Release: "lock not held".)
func TestProxyPortStaysClaimed(t *testing.T) {
	p, err := NewProxy("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	port := p.ln.Addr().(*net.TCPAddr).Port
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkClaimed(t, port)
}

// checkClaimed fails t unless port is below the kernel's ephemeral range
// and claimed against FreePort in this process and in others.
func checkClaimed(t *testing.T, port int) {
	t.Helper()
	lo, hi := portRange()
	if port < lo || port > hi {
		t.Fatalf("port %d, outside %d-%d", port, lo, hi)
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			first, _ := strconv.Atoi(f[0])
			last, _ := strconv.Atoi(f[1])
			if port >= first && port <= last {
				t.Fatalf("port %d, inside the ephemeral range %d-%d", port, first, last)
			}
		}
	}
	if f, ok := lockPortFile(filepath.Join(os.TempDir(), "dlock-test-ports"), port); ok {
		f.Close()
		t.Fatalf("port %d: a second claimant locked its file", port)
	}
	if reservePort(port) {
		t.Fatalf("port %d: not claimed in this process", port)
	}
}

func TestLookBinary(t *testing.T) {
	if _, err := LookBinary("sh"); err != nil {
		t.Errorf("LookBinary(sh): %v", err)
	}
	_, err := LookBinary("testenv-no-such-binary")
	if err == nil || !strings.Contains(err.Error(), "testenv-no-such-binary") {
		t.Errorf("LookBinary(missing) error = %v", err)
	}
	if _, err := LookBinary(""); err == nil {
		t.Error("LookBinary(\"\") succeeded")
	}
	if got := installHint("redis-server"); got != "install it with: apt-get install -y redis-server" {
		t.Errorf("installHint(redis-server) = %q", got)
	}
}

func TestLaunchClusterTooFew(t *testing.T) {
	_, err := LaunchCluster(2)
	if err == nil || err.Error() != "servers: a cluster needs at least 3 masters, got 2" {
		t.Fatalf("LaunchCluster(2) error = %v", err)
	}
}

func TestLaunchRedisBadPort(t *testing.T) {
	if _, err := LaunchRedis(RedisConfig{Port: -1}); err == nil {
		t.Fatal("LaunchRedis with port -1 succeeded")
	}
}

func TestRESPEncode(t *testing.T) {
	var buf bytes.Buffer
	if err := writeCommand(bufio.NewWriter(&buf), []string{"SET", "k", ""}); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"; got != want {
		t.Fatalf("writeCommand = %q, want %q", got, want)
	}
}

func TestRESPDecode(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{"+OK\r\n", "OK", ""},
		{"-ERR bad\r\n", "", "ERR bad"},
		{":-42\r\n", "-42", ""},
		{"$5\r\nhe\r\no\r\n", "he\r\no", ""},
		{"$0\r\n\r\n", "", ""},
		{"$-1\r\n", "", ""},
		{"*-1\r\n", "", ""},
		{"*3\r\n$1\r\na\r\n:1\r\n*2\r\n+x\r\n$-1\r\n", "a\n1\nx\n", ""},
	}
	for _, tt := range tests {
		v, err := readReply(bufio.NewReader(strings.NewReader(tt.in)))
		if err != nil {
			t.Errorf("readReply(%q): %v", tt.in, err)
			continue
		}
		if e, ok := v.(redisError); ok {
			if string(e) != tt.wantErr {
				t.Errorf("readReply(%q) error = %q, want %q", tt.in, e, tt.wantErr)
			}
			continue
		}
		if got := flatten(v); got != tt.want || tt.wantErr != "" {
			t.Errorf("readReply(%q) = %q, want %q (error %q)", tt.in, got, tt.want, tt.wantErr)
		}
	}
	for _, bad := range []string{"", "?x\r\n", "$3\r\nab", ":x\r\n", "+OK\n", "$99999999999\r\n", "*2\r\n+a\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("readReply(%q) succeeded", bad)
		}
	}
}

// echoServer starts a TCP echo server and returns its address.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func TestProxyLatencyKeepsOrder(t *testing.T) {
	t.Parallel()
	p := startProxy(t, echoServer(t))
	p.SetLatency(20 * time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// One round trip first, so that the proxy is already forwarding
	// (and stamping chunks) when the burst below starts.
	c.Write([]byte("w"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var sent bytes.Buffer
	for i := range 200 {
		msg := []byte(strings.Repeat(string(rune('a'+i%26)), 1+i%50))
		sent.Write(msg)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if i == 100 {
			// Let the proxy read the first half with 20ms latency; the
			// second half is then due earlier but must not overtake it.
			time.Sleep(5 * time.Millisecond)
			p.SetLatency(0)
		}
	}
	got := make([]byte, sent.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Fatal("proxied data arrived reordered or corrupted")
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("echo through a proxy with 20ms latency took %v", d)
	}
}

func TestProxyHalfCloseAndRefuse(t *testing.T) {
	t.Parallel()
	p := startProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("bye"))
	c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "bye" {
		t.Fatalf("after half-close read %q, %v; want \"bye\", nil", got, err)
	}

	p.SetRefuse(true)
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		c2.SetDeadline(time.Now().Add(5 * time.Second))
		c2.Write([]byte("x"))
		if _, err = c2.Read(make([]byte, 1)); err == nil {
			t.Fatal("refused connection delivered data")
		}
		c2.Close()
	}
	p.SetRefuse(false)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	c3.SetDeadline(time.Now().Add(5 * time.Second))
	c3.Write([]byte("y"))
	if _, err := io.ReadFull(c3, make([]byte, 1)); err != nil {
		t.Fatalf("after SetRefuse(false): %v", err)
	}
}

func TestProxyCloseIdempotent(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection survived Close: %v", err)
	}
	if _, err := NewProxy("no-port"); err == nil {
		t.Fatal("NewProxy with a bad target succeeded")
	}
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestLaunchSentinelConfigBadInput(t *testing.T) {
	for _, cfg := range []SentinelConfig{
		{MasterAddr: "127.0.0.1:6379"},                           // no name
		{MasterName: "m", MasterAddr: "127.0.0.1"},               // no port
		{MasterName: "m", MasterAddr: "127.0.0.1:x"},             // bad port
		{MasterName: "m", MasterAddr: "127.0.0.1:1", Quorum: -1}, // bad quorum
	} {
		if s, err := LaunchSentinelConfig(cfg); err == nil {
			s.Close()
			t.Errorf("LaunchSentinelConfig(%+v) = nil error", cfg)
		}
	}
}
