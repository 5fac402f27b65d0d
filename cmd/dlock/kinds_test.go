package main_test

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A kind of lock binds its name only while it is held: after `dlock run
// --kind fair`, the name is free for a mutex (it used to be refused with
// exit 69 for ever, until the kind key was deleted by hand).
func TestIntegrationKindBindsOnlyWhileHeld(t *testing.T) {
	t.Parallel()
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
}

// A lock of another kind under the name is refused at once by every
// backend, not waited for, even with --wait: that is a mistake in the name
// or the --kind, exit 64, neither 75 (held) nor 69 (the service is fine),
// with a message naming both kinds and --kind.
func TestIntegrationKindMismatchIsUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    func(testing.TB) deployment
	}{
		{"Redis", func(t testing.TB) deployment { return redisDeployment(t, 1) }},
		{"ZooKeeper", zkDeployment},
		{"etcd", etcdDeployment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.d(t)
			name := lockName(t)
			holder := holdInBackground(t, d, name, "--kind", "semaphore", "--permits", "2")
			for _, wait := range []string{"0", "30s"} {
				start := time.Now()
				r := dlock(t, nil, runArgs(d, "--wait", wait, name, "--", "true")...)
				if r.code != 64 || !strings.Contains(r.stderr, "Semaphore") || !strings.Contains(r.stderr, "Mutex") || !strings.Contains(r.stderr, "--kind") {
					t.Errorf("mutex run (--wait %s) while a semaphore holds the name: exit %d, %q; want 64 naming both kinds and --kind", wait, r.code, r.stderr)
				}
				if took := time.Since(start); took > 15*time.Second {
					t.Errorf("mutex run (--wait %s) while a semaphore holds the name took %v; want it refused at once", wait, took)
				}
			}
			holder.signal(t, syscall.SIGINT)
			holder.wait(t, 10*time.Second)
		})
	}
}

// --permits that disagrees with the size of a semaphore in use is a usage
// error naming both sizes, on every backend with semaphores; the same size
// gets a permit.
func TestIntegrationPermitsDisagree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    func(testing.TB) deployment
	}{
		{"Redis", func(t testing.TB) deployment { return redisDeployment(t, 1) }},
		{"ZooKeeper", zkDeployment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
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
