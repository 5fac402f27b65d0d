package main_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// "dlock elect --observe" campaigns for nothing: it prints each new leader
// as "TERM VALUE", terms increasing, until SIGTERM, and exits 0; on every
// backend.
func TestIntegrationElectObserve(t *testing.T) {
	t.Parallel()
	for _, b := range everyBackend() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.d(t)
			if b.name == "Redlock" {
				d.runFlags = []string{"--ttl", "2s", "--restart-window", "2s"} // see TestIntegrationElect
			}
			name := lockName(t)
			observer := startDlock(t, nil, electArgs(d, "--observe", name)...)
			for _, value := range []string{"first", "second"} {
				leader := startDlock(t, nil, electArgs(d, "--value", value, name, "--", "sleep", "60")...)
				if !eventually(30*time.Second, func() bool { _, _, v := leaderOutput(t, d, name); return v == value }) {
					t.Fatalf("%s did not become leader; stderr: %s", value, leader.kill())
				}
				time.Sleep(1500 * time.Millisecond) // Observe polls at least every second
				leader.signal(t, syscall.SIGTERM)
				leader.wait(t, 30*time.Second)
			}
			if code, _, _ := leaderOutput(t, d, name); code != 3 {
				t.Errorf("elect --leader after both resigned: exit %d; want 3", code)
			}
			select {
			case <-observer.exited:
				r := observer.wait(t, time.Second)
				t.Fatalf("elect --observe exited by itself: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
			default:
			}
			observer.signal(t, syscall.SIGTERM)
			r := observer.wait(t, 20*time.Second)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if r.code != 0 || len(lines) != 2 {
				t.Fatalf("elect --observe: exit %d, stdout %q, stderr %s; want 0 and two leaders", r.code, r.stdout, r.stderr)
			}
			var terms []uint64
			for i, want := range []string{"first", "second"} {
				f, v, _ := strings.Cut(lines[i], " ")
				n, err := strconv.ParseUint(f, 10, 64)
				if err != nil || v != want {
					t.Errorf("line %d = %q; want TERM %s", i+1, lines[i], want)
				}
				terms = append(terms, n)
			}
			if terms[1] <= terms[0] {
				t.Errorf("terms %v do not increase", terms)
			}
		})
	}
}
