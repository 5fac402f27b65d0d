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
