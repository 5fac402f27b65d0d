package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Six runs started together with --once-per run COMMAND once, on every
// backend; the others skip it, exit 0 and say why. A run whose COMMAND failed is not recorded,
// and the record expires after --once-per.
func TestIntegrationOncePer(t *testing.T) {
	t.Parallel()
	for _, tc := range recordBackends {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.d(t)
			name, file := lockName(t), filepath.Join(t.TempDir(), "runs")
			env := []string{"FILE=" + file}
			// --wait: new Redlock masters may not vote yet, and the six
			// runs take turns.
			run := func(command string) result {
				return dlock(t, env, runArgs(d, "--wait", "1m", "--once-per", "3s", name, "--", "sh", "-c", command)...)
			}
			if r := run("exit 3"); r.code != 3 {
				t.Fatalf("failing COMMAND: exit %d, %s", r.code, r.stderr)
			}
			results := make([]result, 6)
			var wg sync.WaitGroup
			for i := range results {
				wg.Go(func() { results[i] = run(`echo ran >> "$FILE"; sleep 0.1`) })
			}
			wg.Wait()
			skipped := 0
			for i, r := range results {
				if r.code != 0 {
					t.Errorf("run %d: exit %d, %s", i, r.code, r.stderr)
				}
				if strings.Contains(r.stderr, "less than --once-per 3s") {
					skipped++
				}
			}
			b, _ := os.ReadFile(file)
			if n := strings.Count(string(b), "ran"); n != 1 || skipped != 5 {
				t.Errorf("COMMAND ran %d times and %d runs said they skipped; want 1 and 5 (a failed run is not recorded)", n, skipped)
			}
			time.Sleep(3 * time.Second)
			if r := run(`echo ran >> "$FILE"`); r.code != 0 || strings.Contains(r.stderr, "skipping") {
				t.Errorf("a run --once-per after the last: exit %d, %q; want it run", r.code, r.stderr)
			}
			if b, _ := os.ReadFile(file); strings.Count(string(b), "ran") != 2 {
				t.Errorf("runs recorded: %q; want 2", b)
			}
		})
	}
}

// "dlock release --force NAME" removes the record of NAME's last
// --once-per run, on every backend, and says so: the next run --once-per
// runs COMMAND instead of skipping it.
func TestIntegrationReleaseClearsOncePer(t *testing.T) {
	t.Parallel()
	for _, tc := range recordBackends {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := tc.d(t)
			name, file := lockName(t), filepath.Join(t.TempDir(), "runs")
			env := []string{"FILE=" + file}
			run := func() result {
				return dlock(t, env, runArgs(d, "--wait", "1m", "--once-per", "1h", name, "--", "sh", "-c", `echo ran >> "$FILE"`)...)
			}
			runs := func() int { b, _ := os.ReadFile(file); return strings.Count(string(b), "ran") }
			if r := run(); r.code != 0 || runs() != 1 {
				t.Fatalf("first run: exit %d, %d runs, %s", r.code, runs(), r.stderr)
			}
			if r := run(); r.code != 0 || runs() != 1 || !strings.Contains(r.stderr, "skipping") {
				t.Fatalf("second run: exit %d, %d runs, %q; want it skipped", r.code, runs(), r.stderr)
			}
			r := dlock(t, nil, append(append([]string{"release"}, d.flags...), "--force", "--yes", name)...)
			if r.code != 0 || !strings.Contains(r.stdout, "Cleared the --once-per record of") {
				t.Fatalf("release --force: exit %d, stdout %q, stderr %q; want 0 and the record cleared", r.code, r.stdout, r.stderr)
			}
			if r := run(); r.code != 0 || runs() != 2 {
				t.Fatalf("run after release --force: exit %d, %d runs, %q; want COMMAND run", r.code, runs(), r.stderr)
			}
			if r := dlock(t, nil, append(append([]string{"release"}, d.flags...), "--force", "--yes", name)...); r.code != 0 || !strings.Contains(r.stdout, "Cleared") {
				t.Fatalf("second release --force: exit %d, %q", r.code, r.stdout)
			}
			if r := dlock(t, nil, append(append([]string{"release"}, d.flags...), "--force", "--yes", name)...); r.code != 0 || strings.Contains(r.stdout, "Cleared") {
				t.Fatalf("release --force with no record: exit %d, %q; want no record cleared", r.code, r.stdout)
			}
		})
	}
}

// recordBackends are the six backends the --once-per tests run on, each
// from a private server; Redlock's masters vote after a 1s window.
var recordBackends = []struct {
	name string
	d    func(testing.TB) deployment
}{
	{"Redis", func(t testing.TB) deployment { return redisDeployment(t, 1) }},
	{"PostgreSQL", func(t testing.TB) deployment { return pgDeployment(t, false) }},
	{"MySQL", func(t testing.TB) deployment { return mysqlDeployment(t, false) }},
	{"ZooKeeper", zkDeployment},
	{"etcd", etcdDeployment},
	{"Redlock", func(t testing.TB) deployment {
		d := redisDeployment(t, 3)
		d.runFlags = []string{"--ttl", "1s", "--restart-window", "1s"}
		return d
	}},
}
