package main_test

import (
	"bytes"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A wait off a terminal prints one line when it starts and one every
// DLOCK_WAIT_REPORT_EVERY (30s unless set; 300ms here), each naming the
// holder's label and how long dlock has waited; on every backend.
func TestIntegrationWaitReportsOffTerminal(t *testing.T) {
	t.Parallel()
	for _, b := range everyBackend() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.d(t)
			name := lockName(t)
			holder := holdInBackground(t, d, name)
			waiter := startDlock(t, []string{"DLOCK_WAIT_REPORT_EVERY=300ms"}, runArgs(d, "--wait", "60s", name, "--", "true")...)
			time.Sleep(2 * time.Second)
			holder.signal(t, syscall.SIGTERM)
			holder.wait(t, 20*time.Second)
			r := waiter.wait(t, 30*time.Second)
			var lines []string
			for _, l := range strings.Split(r.stderr, "\n") {
				if strings.HasPrefix(l, `dlock: waiting for lock "`+name+`": holder "host=`) && strings.Contains(l, "waited ") {
					lines = append(lines, l)
				}
			}
			if r.code != 0 || len(lines) < 2 || strings.Contains(r.stderr, "\r") {
				t.Errorf("waiter: exit %d, %d status lines in %q; want 0 and at least 2 lines naming the holder, no carriage return", r.code, len(lines), r.stderr)
			}
		})
	}
}

// On a terminal the status line is redrawn in place, and cleared when the
// wait ends.
func TestIntegrationWaitStatusOnTerminal(t *testing.T) {
	t.Parallel()
	d := redisDeployment(t, 1)
	name := lockName(t)
	holder := holdInBackground(t, d, name)
	ptmx, tty := openTerminal(t)
	defer ptmx.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waiter := startDlockTo(t, tty, nil, runArgs(d, "--wait", "60s", name, "--", "true")...)
	time.Sleep(2500 * time.Millisecond)
	holder.signal(t, syscall.SIGTERM)
	holder.wait(t, 20*time.Second)
	r := waiter.wait(t, 30*time.Second)
	tty.Close()
	time.Sleep(200 * time.Millisecond)
	ptmx.Close()
	<-copied
	mu.Lock()
	got := out.String()
	mu.Unlock()
	if r.code != 0 || strings.Count(got, "\r\x1b[Kdlock: waiting for lock") < 2 || !strings.HasSuffix(strings.TrimRight(got, "\n"), "\r\x1b[K") || !strings.Contains(got, `holder "host=`) {
		t.Errorf("waiter on a terminal: exit %d, output %q; want the status line redrawn in place at least twice, naming the holder, and cleared at the end", r.code, got)
	}
}
