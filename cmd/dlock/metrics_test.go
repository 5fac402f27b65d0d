package main_test

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// metricsWhileRunning: with --metrics-addr, dlock serves Prometheus
// metrics of its lock while COMMAND runs: one holder, one acquisition.
func metricsWhileRunning(t *testing.T, d deployment) {
	name := lockName(t)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	// --wait: a new Redlock deployment grants its first lock one TTL
	// after first use.
	holder := holdInBackground(t, d, name, "--wait", "30s", "--metrics-addr", addr)
	body := scrape(t, "http://"+addr+"/metrics")
	for _, want := range []struct{ metric, labels, value string }{
		{"dlock_holders", "", "1"},
		{"dlock_acquisitions_total", `result="acquired"`, "1"},
		{"dlock_wait_seconds_count", "", "1"},
	} {
		if !hasSample(body, want.metric, name, want.labels, want.value) {
			t.Errorf("metrics lack %s{lock=%q %s} %s:\n%s", want.metric, name, want.labels, want.value, grepLines(body, "dlock_"))
		}
	}
	if !strings.Contains(body, "go_goroutines") {
		t.Errorf("metrics lack the Go runtime's (go_goroutines)")
	}
	holder.signal(t, syscall.SIGTERM)
	holder.wait(t, 10*time.Second)
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Errorf("metrics still served after dlock exited")
	}
}

// A --metrics-addr that cannot be listened on fails at once, before the
// lock is taken, with exit code 71.
func metricsAddrBusy(t *testing.T, d deployment) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	name := lockName(t)
	r := dlock(t, nil, runArgs(d, "--metrics-addr", ln.Addr().String(), name, "--", "true")...)
	if r.code != 71 || !strings.Contains(r.stderr, "--metrics-addr") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("busy --metrics-addr: exit %d, stderr %q; want 71 and one line naming --metrics-addr", r.code, r.stderr)
	}
	if d.held(t, name) {
		t.Errorf("lock held after dlock refused to start")
	}
}

// scrape GETs url, retrying for a few seconds while the server starts.
func scrape(t *testing.T, url string) string {
	t.Helper()
	var body string
	var lastErr error
	if !eventually(10*time.Second, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			lastErr = err
			return false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body, lastErr = string(b), err
		return err == nil && resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("GET %s: %v", url, lastErr)
	}
	return body
}

// hasSample reports whether the exposition body has a sample of metric
// for the lock called name (on ZooKeeper, its path ends in /name) with
// the label text extra and the given value.
func hasSample(body, metric, name, extra, value string) bool {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, metric+"{") && strings.Contains(l, name+`"`) &&
			strings.Contains(l, extra) && strings.HasSuffix(l, "} "+value) {
			return true
		}
	}
	return false
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
