package main_test

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// everyBackend is the six backends, each on its shared server(s).
func everyBackend() []struct {
	name string
	d    func(testing.TB) deployment
} {
	return []struct {
		name string
		d    func(testing.TB) deployment
	}{
		{"Redis", func(t testing.TB) deployment { return redisDeployment(t, 1) }},
		{"Redlock", func(t testing.TB) deployment { return redlockDeployment(t, 2*time.Second, 2*time.Second) }},
		{"ZooKeeper", zkDeployment},
		{"etcd", etcdDeployment},
		{"PostgreSQL", func(t testing.TB) deployment { return pgDeployment(t, false) }},
		{"MySQL", func(t testing.TB) deployment { return mysqlDeployment(t, false) }},
	}
}

// A name means one lock on every backend: "n" and "n/child" are two
// locks, whichever is held, and a name's child left over from a run of
// "n/child" does not stand in the way of "n", nor of its release --force
// (on ZooKeeper "run n" exited 69, "not a lock node", for a minute after
// "run n/child"; on etcd, while "n/child" was held, "run n" exited 64).
func TestIntegrationNestedNamesAreTwoLocks(t *testing.T) {
	t.Parallel()
	for _, b := range everyBackend() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.d(t)
			parent := lockName(t)
			child := parent + "/child"
			if r := dlock(t, nil, runArgs(d, child, "--", "true")...); r.code != 0 {
				t.Fatalf("run %s: exit %d, %s", child, r.code, r.stderr)
			}
			if r := dlock(t, nil, runArgs(d, parent, "--", "true")...); r.code != 0 {
				t.Errorf("run %s just after run %s: exit %d, %s; want 0", parent, child, r.code, r.stderr)
			}
			if r := dlock(t, nil, append(append([]string{"release"}, d.flags...), "--force", "--yes", parent)...); r.code != 0 || strings.Contains(r.stderr, "not made by") {
				t.Errorf("release --force %s after run %s: exit %d, %s; want 0", parent, child, r.code, r.stderr)
			}
			holder := holdInBackground(t, d, child)
			if rep := inspectJSON(t, d, parent); rep.Held {
				t.Errorf("inspect %s while %s is held = %+v; want it free", parent, child, rep)
			}
			if r := dlock(t, nil, runArgs(d, parent, "--", "true")...); r.code != 0 {
				t.Errorf("run %s while %s is held: exit %d, %s; want 0", parent, child, r.code, r.stderr)
			}
			holder.signal(t, syscall.SIGTERM)
			holder.wait(t, 20*time.Second)
			holder = holdInBackground(t, d, parent)
			if r := dlock(t, nil, runArgs(d, child, "--", "true")...); r.code != 0 {
				t.Errorf("run %s while %s is held: exit %d, %s; want 0", child, parent, r.code, r.stderr)
			}
			holder.signal(t, syscall.SIGTERM)
			holder.wait(t, 20*time.Second)
		})
	}
}

// A NAME that starts with a dash is given after "--", and COMMAND after a
// second "--"; "dlock run NAME" with no COMMAND holds the lock until
// SIGTERM or SIGINT, then releases it and exits 0, as "etcdctl lock NAME"
// does.
func TestIntegrationDashedNameAndHoldUntilSignal(t *testing.T) {
	t.Parallel()
	for _, b := range everyBackend() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.d(t)
			name := "-" + lockName(t)
			if r := dlock(t, nil, runArgs(d, "--", name, "--", "sh", "-c", `test "$DLOCK_NAME" = "$0"`, name)...); r.code != 0 {
				t.Errorf("run -- %s -- COMMAND: exit %d, %s; want 0", name, r.code, r.stderr)
			}
			for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
				p := startDlock(t, nil, runArgs(d, "--wait", "30s", "--", name)...)
				if !eventually(20*time.Second, func() bool { return d.held(t, name) }) {
					t.Fatalf("run -- %s without COMMAND did not take the lock; stderr: %s", name, p.kill())
				}
				if r := dlock(t, nil, runArgs(d, "--", name, "--", "true")...); r.code != 75 {
					t.Errorf("run while run without COMMAND holds: exit %d, %s; want 75", r.code, r.stderr)
				}
				p.signal(t, sig)
				r := p.wait(t, 20*time.Second)
				if r.code != 0 || !strings.Contains(r.stderr, "released lock") {
					t.Errorf("run without COMMAND, on %v: exit %d, %q; want 0 and a line saying it released the lock", sig, r.code, r.stderr)
				}
				if d.held(t, name) {
					t.Errorf("lock still held after run without COMMAND got %v", sig)
				}
			}
		})
	}
}

// A full semaphore says so, not "held by another owner (2 holders)"; on
// every backend that has semaphores.
func TestIntegrationFullSemaphoreSaysSo(t *testing.T) {
	t.Parallel()
	for _, b := range everyBackend() {
		if b.name != "Redis" && b.name != "ZooKeeper" && b.name != "etcd" {
			continue // Redlock, PostgreSQL and MySQL have no semaphore
		}
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.d(t)
			name := lockName(t)
			sem := []string{"--kind", "semaphore", "--permits", "2"}
			var holders []*proc
			for range 2 {
				holders = append(holders, holdInBackground(t, d, name, sem...))
			}
			r := dlock(t, nil, runArgs(d, append(sem, name, "--", "true")...)...)
			if r.code != 75 || !strings.Contains(r.stderr, "is full: its 2 permits are taken") || strings.Contains(r.stderr, "another owner") {
				t.Errorf("run on a full semaphore: exit %d, %q; want 75 saying it is full", r.code, r.stderr)
			}
			for _, h := range holders {
				h.signal(t, syscall.SIGTERM)
				h.wait(t, 20*time.Second)
			}
		})
	}
}
