package main_test

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A kind of lock binds its name only while it is held: after `dlock run
// --kind fair`, the name is free for a mutex (it used to be refused with
// exit 69 for ever, until the kind key was deleted by hand); while a fair
// lock holds it, a mutex run is refused as for any holder (exit 75) with a
// message naming both kinds.
func TestIntegrationKindBindsOnlyWhileHeld(t *testing.T) {
	d := redisDeployment(t, 1)
	name := lockName(t)
	if r := dlock(t, nil, runArgs(d, "--kind", "fair", name, "--", "true")...); r.code != 0 {
		t.Fatalf("fair run: exit %d, %s", r.code, r.stderr)
	}
	if rep := inspectJSON(t, d, name); rep.Held {
		t.Fatalf("released fair lock inspected as %+v", rep)
	}
	if r := dlock(t, nil, runArgs(d, name, "--", "true")...); r.code != 0 {
		t.Fatalf("mutex run on a released fair lock's name: exit %d, %s", r.code, r.stderr)
	}
	holder := holdInBackground(t, d, name, "--kind", "fair")
	r := dlock(t, nil, runArgs(d, "--wait", "0", name, "--", "true")...)
	if r.code != 75 || !strings.Contains(r.stderr, "FairMutex") || !strings.Contains(r.stderr, "Mutex cannot take") {
		t.Errorf("mutex run while a fair lock holds the name: exit %d, %q; want 75 (held) naming both kinds", r.code, r.stderr)
	}
	holder.signal(t, syscall.SIGINT)
	holder.wait(t, 10*time.Second)
}

// On ZooKeeper a lock of another kind under the name is refused at once
// by the library, not waited for: that is a mistake in the name or the
// --kind, exit 64, never 69 (the service is fine).
func TestIntegrationZooKeeperKindMismatchIsUsage(t *testing.T) {
	d := zkDeployment(t)
	name := lockName(t)
	holder := holdInBackground(t, d, name, "--kind", "semaphore", "--permits", "2")
	r := dlock(t, nil, runArgs(d, "--wait", "0", name, "--", "true")...)
	if r.code != 64 || !strings.Contains(r.stderr, "Semaphore") || !strings.Contains(r.stderr, "--kind") {
		t.Errorf("mutex run while a semaphore holds the path: exit %d, %q; want 64 naming the kind and --kind", r.code, r.stderr)
	}
	holder.signal(t, syscall.SIGINT)
	holder.wait(t, 10*time.Second)
}

// --permits that disagrees with the size of a semaphore in use is a usage
// error naming both sizes, on every backend with semaphores; the same size
// gets a permit.
func TestIntegrationPermitsDisagree(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    func(testing.TB) deployment
	}{
		{"Redis", func(t testing.TB) deployment { return redisDeployment(t, 1) }},
		{"ZooKeeper", zkDeployment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d(t)
			name := lockName(t)
			holder := holdInBackground(t, d, name, "--kind", "semaphore", "--permits", "2")
			r := dlock(t, nil, runArgs(d, "--kind", "semaphore", "--permits", "3", name, "--", "true")...)
			if r.code != 64 || !strings.Contains(r.stderr, "--permits 3") || !strings.Contains(r.stderr, "has 2 permits") {
				t.Errorf("--permits 3 on a semaphore of 2: exit %d, %q; want 64 naming both sizes", r.code, r.stderr)
			}
			if r := dlock(t, nil, runArgs(d, "--kind", "semaphore", "--permits", "2", name, "--", "true")...); r.code != 0 {
				t.Errorf("--permits 2 on a semaphore of 2 with one holder: exit %d, %q", r.code, r.stderr)
			}
			holder.signal(t, syscall.SIGINT)
			holder.wait(t, 10*time.Second)
		})
	}
}
