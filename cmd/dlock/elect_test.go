package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// "dlock elect" on every backend: COMMAND runs only on the leader, a
// leader that exits hands over at once, a lost leadership stops COMMAND
// (exit 76, or a new campaign with --again), and --leader prints the
// leader.
func TestIntegrationElect(t *testing.T) {
	t.Parallel()
	backends := []struct {
		name string
		d    func(t testing.TB) deployment
	}{
		{"Redis", func(t testing.TB) deployment { return redisDeployment(t, 1) }},
		{"Redlock", func(t testing.TB) deployment {
			d := redisDeployment(t, 3)
			d.runFlags = []string{"--ttl", "2s", "--restart-window", "2s"} // see TestIntegrationRedlock
			return d
		}},
		{"ZooKeeper", zkDeployment},
		{"PostgreSQL", func(t testing.TB) deployment { return pgDeployment(t, false) }},
		{"MySQL", func(t testing.TB) deployment { return mysqlDeployment(t, false) }},
		{"etcd", etcdDeployment},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			d := b.d(t)
			t.Run("LeaderOnly", func(t *testing.T) { electLeaderOnly(t, d) })
			t.Run("LossStopsCommand", func(t *testing.T) { electLoss(t, d, false) })
			t.Run("AgainAfterLoss", func(t *testing.T) { electLoss(t, d, true) })
			t.Run("ExitCodeAndNoLeader", func(t *testing.T) { electExitCode(t, d) })
		})
	}
}

func electArgs(d deployment, extra ...string) []string {
	return append(append(append([]string{"elect"}, d.flags...), d.runFlags...), extra...)
}

// leaderOutput runs "dlock elect --leader" and returns its exit code and
// the term and value it printed.
func leaderOutput(t *testing.T, d deployment, name string) (code int, term uint64, value string) {
	t.Helper()
	r := dlock(t, nil, electArgs(d, "--leader", name)...)
	if r.code == 0 {
		f, v, _ := strings.Cut(strings.TrimSpace(r.stdout), " ")
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("--leader printed %q; want TERM VALUE", r.stdout)
		}
		return 0, n, v
	}
	return r.code, 0, r.stderr
}

// waitExists waits until path exists.
func waitExists(t *testing.T, path string, d time.Duration) {
	t.Helper()
	if !eventually(d, func() bool { _, err := os.Stat(path); return err == nil }) {
		t.Fatalf("%s does not exist after %v", path, d)
	}
}

func fenceIn(t *testing.T, path string) uint64 {
	t.Helper()
	b, _ := os.ReadFile(path)
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s holds %q, not a fence", path, b)
	}
	return n
}

// Two candidates: only the leader's COMMAND runs, with the term in
// DLOCK_FENCE; when the leader's COMMAND exits, the other's starts at once
// with a higher term.
func electLeaderOnly(t *testing.T, d deployment) {
	name, dir := lockName(t), t.TempDir()
	script := `echo $DLOCK_FENCE > "$DIR/$WHO.fence"; touch "$DIR/$WHO.ready"; while [ ! -e "$DIR/$WHO.stop" ]; do sleep 0.02; done`
	start := func(who string) *proc {
		return startDlock(t, []string{"DIR=" + dir, "WHO=" + who},
			electArgs(d, "--ttl", "3s", "--value", who, name, "--", "sh", "-c", script)...)
	}
	a := start("a")
	waitExists(t, filepath.Join(dir, "a.ready"), 20*time.Second)
	b := start("b")
	code, term, value := leaderOutput(t, d, name)
	if code != 0 || value != "a" || term != fenceIn(t, filepath.Join(dir, "a.fence")) {
		t.Fatalf("--leader: exit %d, term %d, value %q; want a in term %d\na: %s\nb: %s", code, term, value, fenceIn(t, filepath.Join(dir, "a.fence")), a.kill(), b.kill())
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "b.ready")); err == nil {
		t.Fatal("b's COMMAND runs while a leads")
	}
	stopped := time.Now()
	os.WriteFile(filepath.Join(dir, "a.stop"), nil, 0o644)
	if r := a.wait(t, 10*time.Second); r.code != 0 {
		t.Fatalf("a: exit %d, want its COMMAND's 0; stderr: %s", r.code, r.stderr)
	}
	waitExists(t, filepath.Join(dir, "b.ready"), 5*time.Second)
	t.Logf("measured: b's COMMAND started %v after a's COMMAND was told to exit", time.Since(stopped).Round(time.Millisecond))
	if fb, fa := fenceIn(t, filepath.Join(dir, "b.fence")), fenceIn(t, filepath.Join(dir, "a.fence")); fb <= fa {
		t.Fatalf("b's term %d not above a's %d", fb, fa)
	}
	if code, _, value := leaderOutput(t, d, name); code != 0 || value != "b" {
		t.Fatalf("--leader after the hand-over: exit %d, %q; want b", code, value)
	}
	// A signal reaches COMMAND, whose exit ends b's leadership.
	b.signal(t, syscall.SIGTERM)
	if r := b.wait(t, 10*time.Second); r.code != 128+int(syscall.SIGTERM) {
		t.Fatalf("b after SIGTERM: exit %d, want %d; stderr: %s", r.code, 128+int(syscall.SIGTERM), r.stderr)
	}
	if code, _, _ := leaderOutput(t, d, name); code != 3 {
		t.Fatalf("--leader after every candidate left: exit %d, want 3", code)
	}
}

// The lock deleted behind the leader's back: COMMAND is stopped, and dlock
// exits 76, or with --again campaigns again and runs COMMAND anew.
func electLoss(t *testing.T, d deployment, again bool) {
	name, dir := lockName(t), t.TempDir()
	runs := filepath.Join(dir, "runs")
	// --ttl 3s: at 1s a loaded machine missed ZooKeeper's 333ms lease's
	// renewals, and dlock stopped COMMAND for that, not for the deletion.
	args := []string{"--ttl", "3s", "--grace", "200ms", name, "--", "sh", "-c", `echo $DLOCK_FENCE >> "$RUNS"; sleep 60`}
	if again {
		args = append([]string{"--again"}, args...)
	}
	p := startDlock(t, []string{"RUNS=" + runs}, electArgs(d, args...)...)
	waitFile(t, runs, "\n", 20*time.Second)
	d.sabotage(t, name)
	if !again {
		r := p.wait(t, 30*time.Second)
		if r.code != 76 || !strings.Contains(r.stderr, "lost lock") {
			t.Fatalf("exit %d, want 76 with the loss on stderr; stderr: %s", r.code, r.stderr)
		}
		return
	}
	if !eventually(20*time.Second, func() bool {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "\n") >= 2
	}) {
		t.Fatalf("COMMAND not run again after the loss; stderr: %s", p.kill())
	}
	b, _ := os.ReadFile(runs)
	f := strings.Fields(string(b))
	first, _ := strconv.ParseUint(f[0], 10, 64)
	second, _ := strconv.ParseUint(f[1], 10, 64)
	if second <= first {
		t.Fatalf("second term %d not above the first %d", second, first)
	}
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t, 10*time.Second)
	if !strings.Contains(r.stderr, "campaigning again") {
		t.Errorf("stderr does not say it campaigns again: %s", r.stderr)
	}
}

// COMMAND's exit code passes through; --leader of an election without a
// leader exits 3; bad usage exits 64.
func electExitCode(t *testing.T, d deployment) {
	name := lockName(t)
	if r := dlock(t, nil, electArgs(d, name, "--", "sh", "-c", "exit 7")...); r.code != 7 {
		t.Errorf("COMMAND exiting 7: dlock exit %d; stderr: %s", r.code, r.stderr)
	}
	if code, _, stderr := leaderOutput(t, d, name); code != 3 || !strings.Contains(stderr, "no leader") {
		t.Errorf("--leader with no leader: exit %d, %q; want 3", code, stderr)
	}
	for _, args := range [][]string{
		{name},
		{"--leader", name, "--", "true"},
		{"--leader", "--again", name},
		{"--ttl", "1s", "--grace", "1s", name, "--", "true"},
		{},
	} {
		if r := dlock(t, nil, electArgs(d, args...)...); r.code != 64 {
			t.Errorf("dlock elect %q: exit %d, want 64; stderr: %s", args, r.code, r.stderr)
		}
	}
}

// "dlock elect --leader" only reads, as inspect does, so it waits for
// Redlock's masters as long as inspect (a second), not the node timeout
// that keeps a lease of --ttl valid (TTL/20: 200ms at 4s). Before, masters
// that answered in 400ms made it fail, "reading the leader ... reached 0
// of 3 nodes" (exit 69), as a loaded machine once did at 100ms.
func TestIntegrationElectLeaderThroughSlowMasters(t *testing.T) {
	t.Parallel()
	servers := sharedRedlock(t)
	d := redlockDeploymentOn(t, servers, 4*time.Second, 4*time.Second)
	d.flags = nil // the masters, each through a proxy
	var proxies []*testenv.Proxy
	for _, s := range servers {
		p := testenv.StartProxy(t, s.Addr())
		proxies = append(proxies, p)
		d.flags = append(d.flags, "--redis", "redis://"+p.Addr())
	}
	name, ready := lockName(t), filepath.Join(t.TempDir(), "ready")
	leader := startDlock(t, []string{"READY=" + ready}, electArgs(d, "-v", "--value", "slow-masters", name, "--", "sh", "-c", `touch "$READY"; exec sleep 60`)...)
	if !eventually(20*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }) {
		t.Fatalf("the leader did not start its command within 20s; its stderr:\n%s", leader.kill())
	}
	for _, p := range proxies {
		p.SetReplyLatency(400 * time.Millisecond)
	}
	start := time.Now()
	code, _, value := leaderOutput(t, d, name)
	t.Logf("measured: --leader through masters 400ms slow answered in %v", time.Since(start).Round(time.Millisecond))
	if code != 0 || value != "slow-masters" {
		t.Errorf("--leader through masters 400ms slow: exit %d, %q; want the leader's value\nleader: %s", code, value, leader.kill())
	}
}
