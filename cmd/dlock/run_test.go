package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/go-zookeeper/zk"
)

// A deployment is a lock service the black-box tests run dlock against.
type deployment struct {
	flags    []string // backend flags
	runFlags []string // flags every "dlock run" gets first
	// held reports whether anyone holds the lock called name, looking at
	// the servers directly.
	held func(t testing.TB, name string) bool
	// sabotage deletes the lock called name behind its holder's back.
	sabotage func(t testing.TB, name string)
	// redis holds the servers of a Redis or Redlock deployment.
	redis []*testenv.Redis
}

// redisDeployment is a deployment over n Redis servers: the shared
// standalone server for 1, the shared three for 3 (see shared_test.go),
// and n new ones otherwise.
func redisDeployment(t testing.TB, n int) deployment {
	switch n {
	case 1:
		return redisDeploymentOn([]*testenv.Redis{sharedRedis(t)})
	case 3:
		return redisDeploymentOn(sharedRedlock(t))
	}
	return redisDeploymentOn(testenv.StartRedisN(t, n, testenv.RedisConfig{}))
}

// redlockDeployment is a deployment over the shared three Redis servers
// (redisDeployment(t, 3)) for Redlock, with
// "--ttl ttl --restart-window window" first on every run line. Redlock
// lets a node vote only once its server has run for the restart window (a
// new node cannot be told from one that lost its data): this returns when
// every server has, as the servers of a running deployment have. Waiting
// for a majority would not do: a run's majority would then need both
// voting nodes, and one slow to answer on a loaded machine failed it.
func redlockDeployment(t testing.TB, ttl, window time.Duration) deployment {
	return redlockDeploymentOn(t, sharedRedlock(t), ttl, window)
}

// redlockDeploymentOn is redlockDeployment over the servers given.
func redlockDeploymentOn(t testing.TB, servers []*testenv.Redis, ttl, window time.Duration) deployment {
	// quorum_acquire.lua takes the server to have started a second after
	// now less uptime_in_seconds (both in whole seconds).
	need := int((window+time.Second-1)/time.Second) + 1
	uptime := regexp.MustCompile(`uptime_in_seconds:(\d+)`)
	for _, s := range servers {
		for deadline := time.Now().Add(window + 10*time.Second); ; time.Sleep(100 * time.Millisecond) {
			info, err := s.Do("INFO", "server")
			if err != nil {
				t.Fatalf("INFO on %s: %v", s.Addr(), err)
			}
			m := uptime.FindStringSubmatch(info)
			if m == nil {
				t.Fatalf("INFO on %s has no uptime_in_seconds: %q", s.Addr(), info)
			}
			if up, _ := strconv.Atoi(m[1]); up >= need {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not up %ds after %v", s.Addr(), need, window+10*time.Second)
			}
		}
	}
	d := redisDeploymentOn(servers)
	d.runFlags = []string{"--ttl", ttl.String(), "--restart-window", window.String()}
	return d
}

func redisDeploymentOn(servers []*testenv.Redis) deployment {
	n := len(servers)
	d := deployment{redis: servers}
	for _, s := range servers {
		d.flags = append(d.flags, "--redis", "redis://"+s.Addr())
	}
	key := func(name string) string { return "dlock:{" + name + "}" }
	d.held = func(t testing.TB, name string) bool {
		votes := 0
		for _, s := range servers {
			out, err := s.Do("EXISTS", key(name))
			if err != nil {
				t.Fatalf("EXISTS on %s: %v", s.Addr(), err)
			}
			if out == "1" {
				votes++
			}
		}
		return votes > n/2
	}
	d.sabotage = func(t testing.TB, name string) {
		for _, s := range servers {
			if _, err := s.Do("DEL", key(name)); err != nil {
				t.Fatalf("DEL on %s: %v", s.Addr(), err)
			}
		}
	}
	return d
}

func zkDeployment(t testing.TB) deployment {
	srv := sharedZooKeeper(t)
	conn, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	kids := func(t testing.TB, name string) []string {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			k, _, err := conn.Children("/dlock/" + name)
			switch {
			case err == nil:
				return k
			case err == zk.ErrNoNode:
				return nil
			case time.Now().After(deadline):
				t.Fatalf("Children: %v", err)
			}
		}
	}
	return deployment{
		flags: []string{"--zk", srv.Addr()},
		held:  func(t testing.TB, name string) bool { return len(kids(t, name)) > 0 },
		sabotage: func(t testing.TB, name string) {
			for _, k := range kids(t, name) {
				if err := conn.Delete("/dlock/"+name+"/"+k, -1); err != nil && err != zk.ErrNoNode {
					t.Fatalf("Delete: %v", err)
				}
			}
		},
	}
}

func TestIntegrationRedis(t *testing.T) {
	t.Parallel()
	runSuite(t, redisDeployment(t, 1))
}
func TestIntegrationRedlock(t *testing.T) {
	t.Parallel()
	// A short window and TTL keep the wait for new nodes to vote short
	// (see redlockDeployment). Tests that need another TTL give theirs
	// later on the line.
	runSuite(t, redlockDeployment(t, 2*time.Second, 2*time.Second))
}
func TestIntegrationZooKeeper(t *testing.T) {
	t.Parallel()
	runSuite(t, zkDeployment(t))
}

func runSuite(t *testing.T, d deployment) {
	t.Run("SerialisedAppends", func(t *testing.T) { serialisedAppends(t, d) })
	t.Run("ExitCodeAndEnvironment", func(t *testing.T) { exitCodeAndEnvironment(t, d) })
	t.Run("ConflictAndInterrupt", func(t *testing.T) { conflictAndInterrupt(t, d) })
	t.Run("LossKillsCommand", func(t *testing.T) { lossKillsCommand(t, d, false) })
	t.Run("LossKillsStubbornCommand", func(t *testing.T) { lossKillsCommand(t, d, true) })
	t.Run("MaxHoldStopsCommand", func(t *testing.T) { maxHoldStopsCommand(t, d) })
	t.Run("CommandNotFound", func(t *testing.T) { commandNotFound(t, d) })
	t.Run("InspectAndForceRelease", func(t *testing.T) { inspectAndForceRelease(t, d) })
	t.Run("Metrics", func(t *testing.T) { metricsWhileRunning(t, d) })
	t.Run("MetricsAddrBusy", func(t *testing.T) { metricsAddrBusy(t, d) })
}

// lockName is a lock name unique to the test.
func lockName(t testing.TB) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
}

func runArgs(d deployment, extra ...string) []string {
	return append(append(append([]string{"run"}, d.flags...), d.runFlags...), extra...)
}

// 20 dlock processes append a start and an end line to one file under one
// lock: no two runs interleave, all 20 run, and fences increase in the
// order the runs held the lock.
func serialisedAppends(t *testing.T, d deployment) {
	const n = 20
	name, file := lockName(t), filepath.Join(t.TempDir(), "log")
	script := `echo "start $ID $DLOCK_FENCE" >> "$FILE"; sleep 0.02; echo "end $ID" >> "$FILE"`
	var wg sync.WaitGroup
	results := make([]result, n)
	for i := range n {
		wg.Go(func() {
			results[i] = dlock(t, []string{"ID=" + strconv.Itoa(i), "FILE=" + file},
				runArgs(d, "--wait", "2m", name, "--", "sh", "-c", script)...)
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("run %d: exit %d; stderr: %s", i, r.code, r.stderr)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	for sc := bufio.NewScanner(f); sc.Scan(); {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2*n {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2*n, strings.Join(lines, "\n"))
	}
	seen, last := map[string]bool{}, uint64(0)
	for i := 0; i < len(lines); i += 2 {
		var id string
		var fence uint64
		if _, err := fmt.Sscanf(lines[i], "start %s %d", &id, &fence); err != nil {
			t.Fatalf("line %d %q: %v", i, lines[i], err)
		}
		if lines[i+1] != "end "+id {
			t.Fatalf("line %d is %q after %q: two runs interleaved", i+1, lines[i+1], lines[i])
		}
		if fence <= last {
			t.Errorf("run %s has fence %d after %d", id, fence, last)
		}
		seen[id], last = true, fence
	}
	if len(seen) != n {
		t.Errorf("%d distinct runs, want %d", len(seen), n)
	}
	if d.held(t, name) {
		t.Errorf("lock still held after every run exited")
	}
}

// tokenRE matches the token of a dlock run: 128 bits or more in base64url,
// then the label that says who holds the lock.
var tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{22,}~host=[^,\s]+,pid=[0-9]+,start=[0-9TZ:-]+$`)

func exitCodeAndEnvironment(t *testing.T, d deployment) {
	name := lockName(t)
	r := dlock(t, nil, runArgs(d, name, "--", "sh", "-c", `echo "$DLOCK_NAME $DLOCK_TOKEN $DLOCK_FENCE"; exit 7`)...)
	if r.code != 7 {
		t.Fatalf("exit %d, want the command's 7; stderr: %s", r.code, r.stderr)
	}
	f := strings.Fields(r.stdout)
	if len(f) != 3 || f[0] != name || !tokenRE.MatchString(f[1]) {
		t.Fatalf("command saw %q; want NAME, a token of 128 bits or more and a fence", r.stdout)
	}
	if fence, err := strconv.ParseUint(f[2], 10, 64); err != nil || fence == 0 {
		t.Errorf("DLOCK_FENCE = %q", f[2])
	}
	if d.held(t, name) {
		t.Errorf("lock still held after the command exited")
	}
	// Flags after NAME, a command killed by a signal: 128+n. The flag is
	// one that leaves the lease alone: "--ttl 2s" here made a 667ms lease
	// on ZooKeeper (a third of its session timeout), whose renewal had
	// about 190ms to answer before dlock stopped the command, and exited
	// 76, beside two CPU hogs (1 of 40 runs).
	r = dlock(t, nil, runArgs(d, name, "--wait", "20s", "--", "sh", "-c", "kill -TERM $$")...)
	if r.code != 128+int(syscall.SIGTERM) {
		t.Errorf("command killed by SIGTERM: exit %d, want %d; stderr: %s", r.code, 128+int(syscall.SIGTERM), r.stderr)
	}
}

// holdInBackground starts a dlock run that holds name until signalled.
// It waits up to 30s for the lock (extra may say otherwise): servers slow
// to answer on a loaded machine are not what the callers test.
func holdInBackground(t *testing.T, d deployment, name string, extra ...string) *proc {
	ready := filepath.Join(t.TempDir(), "ready")
	args := append(runArgs(d, append([]string{"--wait", "30s"}, extra...)...), name, "--", "sh", "-c", `echo $$ > "$READY"; exec sleep 60`)
	p := startDlock(t, []string{"READY=" + ready}, args...)
	if !eventually(20*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }) {
		t.Fatalf("holder did not start; stderr: %s", p.kill())
	}
	return p
}

// waited returns the time a conflict message says dlock waited ("is held by
// another owner (waited 504ms; …"), or 0 if it says none.
func waited(stderr string) time.Duration {
	_, after, ok := strings.Cut(stderr, "is held by another owner (waited ")
	if !ok {
		return 0
	}
	f := strings.FieldsFunc(after, func(r rune) bool { return r == ';' || r == ')' || r == ' ' })
	if len(f) == 0 {
		return 0
	}
	d, err := time.ParseDuration(f[0])
	if err != nil {
		return 0
	}
	return d
}

func conflictAndInterrupt(t *testing.T, d deployment) {
	name := lockName(t)
	holder := holdInBackground(t, d, name)
	r := dlock(t, nil, runArgs(d, "--wait", "0", name, "--", "true")...)
	if r.code != 75 {
		t.Fatalf("--wait 0 against a holder: exit %d, want 75; stderr: %s", r.code, r.stderr)
	}
	// One message for every backend, Redlock included, with no wait
	// reported for --wait 0, naming the holder's label (host, pid).
	if !strings.HasPrefix(r.stderr, fmt.Sprintf("dlock: lock %q is held by another owner (holder \"host=", name)) ||
		!strings.Contains(r.stderr, fmt.Sprintf(",pid=%d,", holder.cmd.Process.Pid)) || !strings.HasSuffix(r.stderr, "; use --wait to wait for it\n") {
		t.Errorf("conflict message %q; want it to name the holder's label and end with the hint", r.stderr)
	}
	if r := dlock(t, nil, runArgs(d, "--conflict-exit-code", "9", name, "--", "true")...); r.code != 9 {
		t.Errorf("--conflict-exit-code 9: exit %d", r.code)
	}
	// A loaded machine may wake the waiter late: it says how long it
	// really waited, at least the 400ms asked for.
	if r := dlock(t, nil, runArgs(d, "--wait", "400ms", name, "--", "true")...); r.code != 75 || r.took < 400*time.Millisecond ||
		waited(r.stderr) < 400*time.Millisecond {
		t.Errorf("--wait 400ms: exit %d after %v, %q; want 75 after at least 400ms, saying how long it waited", r.code, r.took, r.stderr)
	}
	// SIGINT to dlock reaches the command; the lock is released when it
	// exits, long before its 30s TTL.
	holder.signal(t, syscall.SIGINT)
	hr := holder.wait(t, 10*time.Second)
	if hr.code != 128+int(syscall.SIGINT) {
		t.Errorf("holder after SIGINT: exit %d, want %d; stderr: %s", hr.code, 128+int(syscall.SIGINT), hr.stderr)
	}
	if d.held(t, name) {
		t.Errorf("lock still held after the interrupted holder exited")
	}
	if r := dlock(t, nil, runArgs(d, name, "--", "true")...); r.code != 0 {
		t.Errorf("run after the release: exit %d; stderr: %s", r.code, r.stderr)
	}
}

// Deleting the lock from outside stops the command within the renewal
// period (ttl/3) plus the grace period, and dlock exits with 76.
func lossKillsCommand(t *testing.T, d deployment, stubborn bool) {
	name, dir := lockName(t), t.TempDir()
	ready, pidFile := filepath.Join(dir, "ready"), filepath.Join(dir, "pid")
	script := `echo $$ > "$PIDFILE"; touch "$READY"; sleep 60`
	if stubborn {
		script = `trap "" TERM; ` + script
	}
	// --ttl 3s: on ZooKeeper a lease lasts a third of it; at 1s a loaded
	// machine missed the 333ms lease's renewals, and dlock stopped COMMAND
	// for that before it saw the deletion. --grace is at most --ttl/3.
	const ttl, grace = 3 * time.Second, 200 * time.Millisecond
	p := startDlock(t, []string{"READY=" + ready, "PIDFILE=" + pidFile},
		runArgs(d, "--ttl", ttl.String(), "--grace", grace.String(), name, "--", "sh", "-c", script)...)
	if !eventually(20*time.Second, func() bool { _, err := os.Stat(ready); return err == nil }) {
		t.Fatalf("command did not start; stderr: %s", p.kill())
	}
	sabotaged := time.Now()
	d.sabotage(t, name)
	r := p.wait(t, 30*time.Second)
	took := time.Since(sabotaged)
	if r.code != 76 {
		t.Fatalf("exit %d, want 76; stderr: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "lost lock") {
		t.Errorf("stderr does not say the lock was lost: %s", r.stderr)
	}
	noRepeatedPrefix(t, r.stderr)
	limit := ttl/3 + 1500*time.Millisecond // renewal period, plus slack for a loaded machine
	if stubborn {
		limit += grace
		if !strings.Contains(r.stderr, "SIGKILL") {
			t.Errorf("stderr does not mention SIGKILL for a command that ignores SIGTERM: %s", r.stderr)
		}
	}
	if took > limit {
		t.Errorf("dlock exited %v after the lock was deleted; want at most %v", took, limit)
	}
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 && syscall.Kill(pid, 0) == nil {
		t.Errorf("command (pid %d) still running after dlock exited", pid)
	}
	t.Logf("lock deleted → dlock exit 76 in %v (stubborn=%v)", took.Round(time.Millisecond), stubborn)
}

// --max-hold stops COMMAND so that it is gone by the cap, SIGKILL after
// --grace for one that ignores SIGTERM, and dlock exits 79, whether or not
// the renewals work.
func maxHoldStopsCommand(t *testing.T, d deployment) {
	name, dir := lockName(t), t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// --ttl 3s: on ZooKeeper --ttl is the session timeout, and a lease
	// lasts a third of it; at 1s a loaded machine (two make tests side by
	// side) missed the 333ms lease's renewals and dlock exited 76, lost.
	const ttl, maxHold, grace = 3 * time.Second, 4 * time.Second, 200 * time.Millisecond
	// --wait: a new Redlock's nodes may not vote yet.
	launched := time.Now()
	r := dlock(t, []string{"PIDFILE=" + pidFile}, runArgs(d, "--wait", "30s", "--ttl", ttl.String(), "--max-hold", maxHold.String(),
		"--grace", grace.String(), name, "--", "sh", "-c", `trap "" TERM; echo $$ $(date +%s%N) > "$PIDFILE"; sleep 60`)...)
	exited := time.Now()
	if r.code != 79 || !strings.Contains(r.stderr, "--max-hold "+maxHold.String()) || !strings.Contains(r.stderr, "SIGKILL") {
		t.Fatalf("exit %d, want 79 with a message naming --max-hold and SIGKILL; stderr: %s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(pidFile)
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("pid file %q", b)
	}
	if processAlive(f[0]) {
		t.Errorf("command (pid %s) still running after dlock exited", f[0])
	}
	// Renewals every ttl/3 go on until the cap: the stop is near it, not
	// at the first TTL. The cap counts from the grant, which comes after
	// dlock was launched and before COMMAND started (a loaded machine
	// takes a good part of a second to start a shell).
	ns, _ := strconv.ParseInt(f[1], 10, 64)
	held := exited.Sub(time.Unix(0, ns))
	if ran := exited.Sub(launched); ran < maxHold-grace-ttl/20 || held > maxHold+3*time.Second {
		t.Errorf("dlock exited %v after it was launched, %v after COMMAND started; want about --max-hold %v", ran, held, maxHold)
	}
	if d.held(t, name) {
		t.Errorf("lock still held after --max-hold")
	}
	t.Logf("--max-hold %v: exit 79 %v after COMMAND started", maxHold, held.Round(time.Millisecond))
}

// noRepeatedPrefix fails t if a line of stderr says "dlock: " more than
// once, or names a sentinel the line has said already.
func noRepeatedPrefix(t *testing.T, stderr string) {
	t.Helper()
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Count(line, "dlock: ") > 1 || strings.Contains(line, "lock lost:") || strings.Contains(line, "lock not obtained:") {
			t.Errorf("a repeated prefix in %q", line)
		}
	}
}

func commandNotFound(t *testing.T, d deployment) {
	name := lockName(t)
	r := dlock(t, nil, runArgs(d, name, "--", "/nonexistent/command")...)
	if r.code != 127 {
		t.Errorf("missing command: exit %d, want 127; stderr: %s", r.code, r.stderr)
	}
	if d.held(t, name) {
		t.Errorf("lock still held after the command could not start")
	}
}

// report is the part of "dlock inspect -o json" the tests read.
type report struct {
	Kind    string `json:"kind"`
	Held    bool   `json:"held"`
	Fence   uint64 `json:"fence,string"`
	Holders []struct {
		Owner string `json:"owner"`
		Label string `json:"label"`
	} `json:"holders"`
}

func inspectJSON(t *testing.T, d deployment, name string) report {
	t.Helper()
	r := dlock(t, nil, append(append([]string{"inspect"}, d.flags...), "-o", "json", name)...)
	if r.code != 0 {
		t.Fatalf("inspect: exit %d; stderr: %s", r.code, r.stderr)
	}
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("inspect -o json: %v in %q", err, r.stdout)
	}
	return rep
}

// inspect shows the holder and its fence; release --force removes it, the
// waiter gets the lock at once, and the old holder's command is stopped
// at its next renewal.
func inspectAndForceRelease(t *testing.T, d deployment) {
	name, dir := lockName(t), t.TempDir()
	if rep := inspectJSON(t, d, name); rep.Held || len(rep.Holders) != 0 {
		t.Fatalf("unused lock inspected as %+v", rep)
	}
	// --ttl 3s: on ZooKeeper a lease lasts a third of it, and at 2s a
	// loaded machine missed the renewals of the 667ms lease.
	holder := holdInBackground(t, d, name, "--ttl", "3s", "--grace", "100ms")
	got := filepath.Join(dir, "got")
	waiter := startDlock(t, []string{"GOT=" + got},
		runArgs(d, "--wait", "1m", name, "--", "sh", "-c", `echo $DLOCK_FENCE > "$GOT"`)...)
	rep := inspectJSON(t, d, name)
	if !rep.Held || len(rep.Holders) != 1 || rep.Fence == 0 || !tokenRE.MatchString(rep.Holders[0].Owner) {
		t.Fatalf("held lock inspected as %+v", rep)
	}
	host, _ := os.Hostname()
	if label, pid := rep.Holders[0].Label, holder.cmd.Process.Pid; !strings.HasPrefix(label, fmt.Sprintf("host=%s,pid=%d,start=", host, pid)) {
		t.Errorf("holder labelled %q, want this host and the holding dlock's pid %d", label, pid)
	}
	table := dlock(t, nil, append(append([]string{"inspect"}, d.flags...), name)...)
	if table.code != 0 || !strings.Contains(table.stdout, rep.Holders[0].Label) || !strings.Contains(table.stdout, "fence") {
		t.Errorf("inspect table (exit %d) lacks the holder's label or fence:\n%s", table.code, table.stdout)
	}
	release := func(args ...string) result {
		return dlock(t, nil, append(append(append([]string{"release"}, d.flags...), args...), name)...)
	}
	if r := release(); r.code != 64 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("release without --force: exit %d, %q", r.code, r.stderr)
	}
	if r := release("--force"); r.code != 64 || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("release --force from a pipe without --yes: exit %d, %q", r.code, r.stderr)
	}
	if _, err := os.Stat(got); err == nil {
		t.Fatal("the waiter ran before the release")
	}
	released := time.Now()
	if r := release("--force", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "Released") {
		t.Fatalf("release --force --yes: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if w := waiter.wait(t, 20*time.Second); w.code != 0 {
		t.Errorf("waiter: exit %d; stderr: %s", w.code, w.stderr)
	}
	b, _ := os.ReadFile(got)
	if fence, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); fence <= rep.Fence {
		t.Errorf("waiter's fence %q is not above the old holder's %d", b, rep.Fence)
	}
	t.Logf("release --force → waiter done in %v", time.Since(released).Round(time.Millisecond))
	if h := holder.wait(t, 20*time.Second); h.code != 76 || !strings.Contains(h.stderr, "lost lock") {
		t.Errorf("old holder: exit %d, want 76; stderr: %s", h.code, h.stderr)
	}
	if rep := inspectJSON(t, d, name); rep.Held {
		t.Errorf("lock still held after everyone exited: %+v", rep)
	}
}
