package main_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// These tests run two "dlock run"s on one lock, the second waiting for it,
// and check that the second's COMMAND never starts while anything the
// first's COMMAND started still runs: its main process, a group member
// that ignores SIGTERM, a daemon in a session of its own, a background
// worker, and all of them when dlock itself is killed with SIGKILL.
//
// Every process of the first's COMMAND is a worker.sh that appends
// "TAG PID NANOSECONDS" to one log every 50ms and records its pid. The
// second's COMMAND, check.sh, appends "B PID NANOSECONDS" as it starts,
// then "ALIVE PID STATE" for every recorded process not yet dead.

const workerScript = `#!/bin/sh
# worker.sh TAG [N]: append "TAG PID NANOSECONDS" to $LOG every 50ms, N times
# (0 or none: until killed), then "TAG-end PID NANOSECONDS".
[ -n "$IGNORE_TERM" ] && trap '' TERM
echo $$ >> "$PIDS"
i=0
while [ "${2:-0}" = 0 ] || [ "$i" -lt "$2" ]; do
	echo "$1 $$ $(date +%s%N)" >> "$LOG"
	sleep 0.05
	i=$((i+1))
done
echo "$1-end $$ $(date +%s%N)" >> "$LOG"
`

const checkScript = `#!/bin/sh
# check.sh: append "B PID NANOSECONDS", then "ALIVE PID STATE" for every
# worker.sh in $PIDS that is still alive, then wait a little.
echo "B $$ $(date +%s%N)" >> "$LOG"
for p in $(cat "$PIDS"); do
	stat=$(cat /proc/$p/stat 2>/dev/null) || continue
	set -- $stat
	[ "$2" = "(worker.sh)" ] && [ "$3" != Z ] && echo "ALIVE $p $3" >> "$LOG"
done
sleep 0.3 # time for a process of the first that is still alive to write
`

// A family is what two runs share: the scripts, the log and the pids of
// the first run's processes.
type family struct {
	dir, log, pids, errs string
}

func newFamily(t *testing.T) *family {
	t.Helper()
	dir := t.TempDir()
	f := &family{dir: dir, log: filepath.Join(dir, "log"), pids: filepath.Join(dir, "pids"), errs: filepath.Join(dir, "stderr")}
	for name, text := range map[string]string{"worker.sh": workerScript, "check.sh": checkScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Whatever a failed run left behind is killed, so that it does not
	// write on after the test.
	t.Cleanup(func() {
		for _, pid := range f.workers() {
			if f.alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if b, _ := os.ReadFile(f.errs); len(b) > 0 {
			t.Logf("stderr of the commands:\n%s", b)
		}
	})
	return f
}

// env is the environment of both runs: the scripts on PATH, and where
// they write.
func (f *family) env() []string {
	return []string{"PATH=" + f.dir + ":" + os.Getenv("PATH"), "LOG=" + f.log, "PIDS=" + f.pids, "ERRS=" + f.errs}
}

// command is sh -c script with every process's output sent away from
// dlock's own stdout and stderr, so that a process dlock left behind does
// not keep the test's pipes open.
func (f *family) command(script string) []string {
	return []string{"sh", "-c", `exec >/dev/null 2>>"$ERRS"; ` + script}
}

func (f *family) workers() []int {
	b, _ := os.ReadFile(f.pids)
	var pids []int
	for _, s := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(s); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid is a worker.sh that has not died.
func (f *family) alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && strings.Contains(string(b), "(worker.sh)") && processAlive(strconv.Itoa(pid))
}

type logLine struct {
	tag string
	pid int
	ns  int64
}

func (f *family) lines(t *testing.T) []logLine {
	t.Helper()
	file, err := os.Open(f.log)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var lines []logLine
	for sc := bufio.NewScanner(file); sc.Scan(); {
		var l logLine
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d", &l.tag, &l.pid, &l.ns); err != nil && !strings.HasPrefix(sc.Text(), "ALIVE ") {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	return lines
}

// waitFor waits until every tag has written, that is until the first
// run's processes all run.
func (f *family) waitFor(t *testing.T, p *proc, tags ...string) {
	t.Helper()
	ok := eventually(30*time.Second, func() bool {
		b, _ := os.ReadFile(f.log)
		for _, tag := range tags {
			if !strings.Contains("\n"+string(b), "\n"+tag+" ") {
				return false
			}
		}
		return true
	})
	if !ok {
		b, _ := os.ReadFile(f.log)
		t.Fatalf("the first run's processes %v did not all start; log:\n%s\ndlock's stderr:\n%s", tags, b, p.kill())
	}
}

// noneAlive fails the test if a process of the first run is still alive.
func (f *family) noneAlive(t *testing.T, when string) {
	t.Helper()
	for _, pid := range f.workers() {
		if f.alive(pid) {
			t.Errorf("%s, process %d of its COMMAND is still running", when, pid)
		}
	}
}

// noOverlap checks the log: the second run's COMMAND started once, found
// no process of the first alive, and no process of the first (each tag
// of which wrote) wrote after it started.
func (f *family) noOverlap(t *testing.T, tags ...string) {
	t.Helper()
	lines := f.lines(t)
	var b *logLine
	wrote := map[string]bool{}
	for i, l := range lines {
		switch {
		case l.tag == "B":
			if b != nil {
				t.Fatalf("the second run's COMMAND started twice")
			}
			b = &lines[i]
		case l.tag == "ALIVE":
		default:
			wrote[strings.TrimSuffix(l.tag, "-end")] = true
		}
	}
	if b == nil {
		t.Fatalf("the second run's COMMAND never started")
	}
	for _, tag := range tags {
		if !wrote[tag] {
			t.Errorf("process %s of the first run never wrote", tag)
		}
	}
	raw, _ := os.ReadFile(f.log)
	var alive []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "ALIVE ") {
			alive = append(alive, strings.TrimPrefix(line, "ALIVE "))
		}
	}
	if len(alive) > 0 {
		t.Errorf("the second run's COMMAND started while processes of the first were alive (pid, state): %q", alive)
	}
	late, last := 0, int64(0)
	for _, l := range lines {
		if l.tag != "B" && l.tag != "ALIVE" {
			last = max(last, l.ns)
			if l.ns > b.ns {
				late++
			}
		}
	}
	if late > 0 {
		t.Errorf("the first run's processes wrote %d lines after the second's COMMAND started, the last %v after",
			late, time.Duration(last-b.ns).Round(time.Millisecond))
		return
	}
	t.Logf("the first run's last write came %v before the second's COMMAND started", time.Duration(b.ns-last).Round(time.Millisecond))
}

// A group member that ignores SIGTERM: when the lock cannot be renewed,
// SIGKILL reaches it before the lock's end, and dlock exits only when it
// is gone.
func TestIntegrationRunStubbornGroupMember(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	proxy := testenv.StartProxy(t, srv.Addr())
	f, name := newFamily(t), lockName(t)
	first := startDlock(t, f.env(), append([]string{"run", "--redis", "redis://" + proxy.Addr(), "--ttl", "6s", "--grace", "1s", name, "--"},
		f.command(`IGNORE_TERM=1 worker.sh W & exec worker.sh M`)...)...)
	f.waitFor(t, first, "W", "M")
	proxy.Blackhole(true) // the first can no longer renew: its lease ends
	second := startDlock(t, f.env(), "run", "--redis", "redis://"+srv.Addr(), "--wait", "1m", name, "--", "check.sh")
	r1 := first.wait(t, time.Minute)
	f.noneAlive(t, "after the first dlock exited")
	t.Logf("first run: exit %d after %v; stderr:\n%s", r1.code, r1.took.Round(time.Millisecond), r1.stderr)
	if r1.code != 76 || !strings.Contains(r1.stderr, "SIGKILL") {
		t.Errorf("first run: exit %d, want 76 after SIGKILL; stderr:\n%s", r1.code, r1.stderr)
	}
	if r2 := second.wait(t, time.Minute); r2.code != 0 {
		t.Errorf("second run: exit %d; stderr:\n%s", r2.code, r2.stderr)
	}
	f.noOverlap(t, "W", "M")
}

// A daemon (setsid and a double fork: a session and process group of its
// own, its parent gone): dlock holds the lock while it runs, although
// COMMAND's main process exited at once, and stops it when the lock
// cannot be renewed.
func TestIntegrationRunDaemon(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	proxy := testenv.StartProxy(t, srv.Addr())
	f, name := newFamily(t), lockName(t)
	first := startDlock(t, f.env(), append([]string{"run", "--redis", "redis://" + proxy.Addr(), "--ttl", "6s", "--grace", "1s", name, "--"},
		f.command(`( setsid sh -c 'worker.sh D </dev/null &' & ); exit 0`)...)...)
	f.waitFor(t, first, "D")
	second := startDlock(t, f.env(), "run", "--redis", "redis://"+srv.Addr(), "--wait", "1m", name, "--", "check.sh")
	// The second waits while the daemon runs; then the first's lease
	// cannot be renewed, and the daemon is stopped before it ends.
	time.Sleep(time.Second)
	proxy.Blackhole(true)
	r1 := first.wait(t, time.Minute)
	f.noneAlive(t, "after the first dlock exited")
	t.Logf("first run: exit %d after %v; stderr:\n%s", r1.code, r1.took.Round(time.Millisecond), r1.stderr)
	if r1.code != 76 {
		t.Errorf("first run: exit %d, want 76; stderr:\n%s", r1.code, r1.stderr)
	}
	if r2 := second.wait(t, time.Minute); r2.code != 0 {
		t.Errorf("second run: exit %d; stderr:\n%s", r2.code, r2.stderr)
	}
	f.noOverlap(t, "D")
}

// A background worker (sh -c 'worker & exit 0'): the lock is held until
// the worker exits, as flock(1) holds it, and dlock exits with COMMAND's
// code then. With --leave-children, the lock is released when COMMAND's
// main process exits, and the worker is left running.
func TestIntegrationRunBackgroundWorker(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	redis := "redis://" + srv.Addr()
	f, name := newFamily(t), lockName(t)
	first := startDlock(t, f.env(), append([]string{"run", "--redis", redis, name, "--"},
		f.command(`worker.sh W 20 & exit 3`)...)...)
	f.waitFor(t, first, "W")
	second := startDlock(t, f.env(), "run", "--redis", redis, "--wait", "1m", name, "--", "check.sh")
	if r1 := first.wait(t, time.Minute); r1.code != 3 {
		t.Errorf("first run: exit %d, want COMMAND's 3; stderr:\n%s", r1.code, r1.stderr)
	}
	f.noneAlive(t, "after the first dlock exited")
	if r2 := second.wait(t, time.Minute); r2.code != 0 {
		t.Errorf("second run: exit %d; stderr:\n%s", r2.code, r2.stderr)
	}
	f.noOverlap(t, "W")

	t.Run("LeaveChildren", func(t *testing.T) {
		f := newFamily(t)
		r := dlock(t, f.env(), append([]string{"run", "--redis", redis, "--leave-children", name, "--"},
			f.command(`worker.sh L 100 & while [ ! -s "$PIDS" ]; do sleep 0.05; done; exit 0`)...)...)
		if r.code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		if pids := f.workers(); len(pids) != 1 || !f.alive(pids[0]) {
			t.Errorf("with --leave-children, the worker (pids %v) is not running after dlock exited", pids)
		}
		if r := dlock(t, nil, "run", "--redis", redis, name, "--", "true"); r.code != 0 {
			t.Errorf("with --leave-children, the lock was not released when COMMAND exited: exit %d; stderr:\n%s", r.code, r.stderr)
		}
	})
}

// dlock killed with SIGKILL: its COMMAND, a group member that ignores
// SIGTERM and a daemon die with it, before the lock it held expires.
func TestIntegrationRunKilledDlock(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	redis := "redis://" + srv.Addr()
	f, name := newFamily(t), lockName(t)
	first := startDlock(t, f.env(), append([]string{"run", "--redis", redis, "--ttl", "3s", name, "--"},
		f.command(`IGNORE_TERM=1 worker.sh W & ( setsid sh -c 'worker.sh D </dev/null &' & ); exec worker.sh M`)...)...)
	f.waitFor(t, first, "W", "D", "M")
	killed := time.Now()
	first.kill()
	second := startDlock(t, f.env(), "run", "--redis", redis, "--wait", "1m", name, "--", "check.sh")
	// The supervisor kills everything at once; the lock outlives dlock by
	// up to its TTL. Give the processes that TTL (3s) to die.
	if !eventually(3*time.Second, func() bool {
		for _, pid := range f.workers() {
			if f.alive(pid) {
				return false
			}
		}
		return true
	}) {
		f.noneAlive(t, fmt.Sprintf("%v after dlock was killed", time.Since(killed).Round(time.Millisecond)))
	} else {
		t.Logf("every process of the first run's COMMAND died within %v of dlock's SIGKILL", time.Since(killed).Round(time.Millisecond))
	}
	if r2 := second.wait(t, time.Minute); r2.code != 0 {
		t.Errorf("second run: exit %d; stderr:\n%s", r2.code, r2.stderr)
	}
	f.noOverlap(t, "W", "D", "M")
}

// Renewals that are slow, but answer within the time --grace leaves them
// (about ttl/4 at the largest grace, ttl/3), do not stop COMMAND early.
// A renewal may take a few round trips (a new connection, a script sent
// again after NOSCRIPT): 40ms each here, against about 800ms allowed.
func TestIntegrationRunSlowRenewals(t *testing.T) {
	t.Parallel()
	srv := testenv.StartRedis(t, testenv.RedisConfig{})
	proxy := testenv.StartProxy(t, srv.Addr())
	proxy.SetLatency(20 * time.Millisecond) // each way
	r := dlock(t, nil, "run", "--redis", "redis://"+proxy.Addr(), "--ttl", "3s", "--grace", "1s", lockName(t), "--", "sleep", "4")
	if r.code != 0 {
		t.Errorf("exit %d, want 0 (4 renewals, each slowed by 40ms round trips); stderr:\n%s", r.code, r.stderr)
	}
}
