package main_test

import (
	"strings"
	"testing"
	"time"
)

// PostgreSQL and MySQL cannot count a lock's waiters: inspect says
// "unknown" rather than 0, leaves them out of its JSON, and release
// --force does not claim that it woke them (MySQL's poll).
func TestIntegrationWaitersUnknown(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		deploy func(testing.TB, bool) deployment
	}{{"MySQL", mysqlDeployment}, {"Postgres", pgDeployment}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := c.deploy(t, false)
			name := lockName(t)
			holder := startDlock(t, nil, runArgs(d, name, "--", "sleep", "30")...)
			if !eventually(10*time.Second, func() bool { return d.held(t, name) }) {
				t.Fatalf("the holder did not take the lock: %s", holder.stderr.String())
			}
			waiter := startDlock(t, nil, runArgs(d, "--wait", "30s", name, "--", "true")...)
			defer waiter.kill()
			r := dlock(t, nil, append(append([]string{"inspect"}, d.flags...), name)...)
			if r.code != 0 || !strings.Contains(r.stdout, "waiters") || !strings.Contains(r.stdout, "unknown") {
				t.Errorf("inspect with a waiter: exit %d, %q; want waiters unknown", r.code, r.stdout)
			}
			r = dlock(t, nil, append(append([]string{"inspect", "-o", "json"}, d.flags...), name)...)
			if r.code != 0 || strings.Contains(r.stdout, `"waiters"`) {
				t.Errorf("inspect -o json: exit %d, %q; want no waiters field", r.code, r.stdout)
			}
			r = dlock(t, nil, append(append([]string{"release", "--force", "--yes"}, d.flags...), name)...)
			if r.code != 0 || (c.name == "MySQL" && strings.Contains(r.stdout, "woken")) {
				t.Errorf("release --force: exit %d, %q; want 0, and no claim to have woken MySQL's waiters", r.code, r.stdout)
			}
		})
	}
}
