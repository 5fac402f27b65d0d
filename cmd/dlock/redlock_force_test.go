package main_test

import (
	"strings"
	"testing"
	"time"
)

// release --force on Redlock goes through redlock's ForceUnlock, which
// records the deposed holder's token on every master, so that a renewal
// under way cannot take a master back for it.
func TestIntegrationRedlockForceReleaseDeposes(t *testing.T) {
	t.Parallel()
	d := redlockDeployment(t, 2*time.Second, 2*time.Second)
	name := lockName(t)
	holder := holdInBackground(t, d, name)
	defer holder.kill()
	// The holder's Lock returns on a majority; the last node's key may
	// come a moment later.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		n := 0
		for _, s := range d.redis {
			if v, _ := s.Do("EXISTS", "dlock:{"+name+"}"); v == "1" {
				n++
			}
		}
		if n == len(d.redis) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the holder's key is on %d of %d nodes 5s after it was granted", n, len(d.redis))
		}
	}
	r := dlock(t, nil, append(append([]string{"release", "--force", "--yes"}, d.flags...), name)...)
	if r.code != 0 {
		t.Fatalf("release --force: exit %d, %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "removed 3 masters' keys") {
		t.Errorf("release --force said %q; want it to count 3 masters' keys", r.stdout)
	}
	for _, s := range d.redis {
		out, err := s.Do("ZCARD", "dlock:{"+name+"}:deposed")
		if err != nil || out != "1" {
			t.Errorf("ZCARD of the deposed set on %s = %q, %v; want the holder's token", s.Addr(), out, err)
		}
	}
	if d.held(t, name) {
		t.Errorf("lock %q still held after release --force", name)
	}
}
