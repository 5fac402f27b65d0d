package testenv

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartPushgateway starts Debian's prometheus-pushgateway on a free
// loopback port and returns its base URL, such as "http://127.0.0.1:12345".
// It stops when t ends.
func StartPushgateway(t testing.TB) string {
	t.Helper()
	SkipIfShort(t, "starts prometheus-pushgateway")
	bin := RequireBinary(t, "prometheus-pushgateway")
	return startPromServer(t, "prometheus-pushgateway", bin, func(addr, dir string) []string {
		return []string{"--web.listen-address=" + addr, "--persistence.interval=1h"}
	})
}

// StartPrometheus starts Debian's prometheus on a free loopback port with
// the configuration config (prometheus.yml's text) and returns its base
// URL. It stops when t ends.
func StartPrometheus(t testing.TB, config string) string {
	t.Helper()
	SkipIfShort(t, "starts prometheus")
	bin := RequireBinary(t, "prometheus")
	return startPromServer(t, "prometheus", bin, func(addr, dir string) []string {
		conf := filepath.Join(dir, "prometheus.yml")
		if err := os.WriteFile(conf, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"--config.file=" + conf, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=" + addr, "--log.level=warn"}
	})
}

// startPromServer runs bin with the arguments args gives for a free
// loopback address and a temporary directory, waits until it answers
// /-/ready, and stops it (SIGTERM, then SIGKILL) when t ends, logging its
// output if t failed.
func startPromServer(t testing.TB, what, bin string, args func(addr, dir string) []string) string {
	t.Helper()
	dir := t.TempDir()
	port, err := FreePort()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	logPath := filepath.Join(dir, what+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args(addr, dir)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("%s: %v", what, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s log:\n%s", what, tail(string(b), logTailLines))
			}
		}
	})
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/-/ready", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s exited before it was ready (%v):\n%s", what, err, tail(string(b), logTailLines))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s on %s not ready after 30s:\n%s", what, addr, tail(string(b), logTailLines))
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
