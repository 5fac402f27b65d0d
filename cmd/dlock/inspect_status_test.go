package main_test

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// "dlock inspect --exit-status" tells scripts held (0) from free (3), and
// --json is -o json; on every backend.
func TestIntegrationInspectExitStatusAndJSON(t *testing.T) {
	t.Parallel()
	for _, b := range everyBackend() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.d(t)
			name := lockName(t)
			inspect := func(extra ...string) result {
				return dlock(t, nil, append(append(append([]string{"inspect"}, d.flags...), extra...), name)...)
			}
			if r := inspect("--exit-status"); r.code != 3 || !strings.Contains(r.stdout, "held") {
				t.Errorf("inspect --exit-status of a free lock: exit %d, %q, %s; want 3 and the table", r.code, r.stdout, r.stderr)
			}
			if r := inspect(); r.code != 0 {
				t.Errorf("inspect of a free lock: exit %d, %s; want 0 without --exit-status", r.code, r.stderr)
			}
			holder := holdInBackground(t, d, name)
			if r := inspect("--exit-status"); r.code != 0 {
				t.Errorf("inspect --exit-status of a held lock: exit %d, %s; want 0", r.code, r.stderr)
			}
			r := inspect("--json", "--exit-status")
			var rep report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 || !rep.Held || len(rep.Holders) != 1 || !strings.Contains(rep.Holders[0].Label, "pid=") {
				t.Errorf("inspect --json of a held lock: exit %d, %v, %q; want 0 and JSON naming the holder", r.code, err, r.stdout)
			}
			holder.signal(t, syscall.SIGTERM)
			holder.wait(t, 20*time.Second)
		})
	}
}

// inspect shows when the last --once-per run finished, where --once-per
// is offered.
func TestIntegrationInspectShowsLastRun(t *testing.T) {
	t.Parallel()
	for _, b := range everyBackend() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.d(t)
			name := lockName(t)
			r := dlock(t, nil, runArgs(d, "--once-per", "1h", name, "--", "true")...)
			if r.code == 64 && strings.Contains(r.stderr, "--once-per") {
				t.Skipf("--once-per is not offered here: %s", r.stderr)
			}
			if r.code != 0 {
				t.Fatalf("run --once-per: exit %d, %s", r.code, r.stderr)
			}
			r = dlock(t, nil, append(append([]string{"inspect"}, d.flags...), name)...)
			if r.code != 0 || !strings.Contains(r.stdout, "last run") || !strings.Contains(r.stdout, "ago (--once-per)") {
				t.Errorf("inspect after a --once-per run: exit %d, %q, %s; want a line saying when it finished", r.code, r.stdout, r.stderr)
			}
			r = dlock(t, nil, append(append([]string{"inspect", "--json"}, d.flags...), name)...)
			var rep struct {
				LastRunMs int64 `json:"last_run_ago_ms"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.LastRunMs <= 0 || rep.LastRunMs > time.Minute.Milliseconds() {
				t.Errorf("inspect --json after a --once-per run: %v, %q; want last_run_ago_ms within a minute", err, r.stdout)
			}
		})
	}
}
