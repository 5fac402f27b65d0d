package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// hist builds a history by hand: times in milliseconds from t0.
type hist struct {
	h  History
	t0 Mono
}

func newHist() *hist { return &hist{t0: Mono(time.Hour)} }

func (b *hist) at(ms int) Mono { return b.t0.Add(time.Duration(ms) * time.Millisecond) }

func (b *hist) add(ms int, e Event) *hist {
	e.At = b.at(ms)
	b.h.Add(e)
	return b
}

// cycle records a client's clean cycle: grant at from, enter, an accepted
// write and an acknowledged addition, exit, release and done at to, with
// a lease valid until from+ttl.
func (b *hist) cycle(client int, fence uint64, from, to, ttl int) *hist {
	val := "v" + string(rune('a'+client)) + string(rune('0'+fence%10))
	b.add(from-1, Event{Op: OpAcquire, Client: client})
	b.add(from, Event{Op: OpGrant, Client: client, Fence: fence, Until: b.at(from + ttl)})
	b.add(from, Event{Op: OpEnter, Client: client, Fence: fence})
	b.add(from+1, Event{Op: OpAdded, Client: client, Value: val})
	b.add(from+1, Event{Op: OpWrite, Client: client, Fence: fence, Value: val})
	b.add(to, Event{Op: OpExit, Client: client, Fence: fence})
	b.add(to, Event{Op: OpRelease, Client: client, Fence: fence})
	b.add(to, Event{Op: OpDone, Client: client, Fence: fence, Err: "released"})
	return b
}

func (b *hist) check(backend string) *Verdict {
	return Check(&b.h, CheckConfig{Backend: backend, Window: time.Second})
}

func kinds(v *Verdict) map[Kind]int {
	m := map[Kind]int{}
	for _, x := range v.Violations {
		m[x.Kind]++
	}
	return m
}

func TestCheckCleanHistory(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.cycle(1, 10, 10, 20, 1000).cycle(2, 11, 25, 40, 1000).cycle(1, 12, 41, 60, 1000)
	b.add(61, Event{Op: OpFinal, Values: []string{"vb0", "vc1", "vb2"}})
	b.add(62, Event{Op: OpStop})
	v := b.check(BackendRedis)
	if len(v.Violations) != 0 || !v.OK() {
		t.Fatalf("clean history: %+v", v.Violations)
	}
	if v.Grants != 3 || v.WritesAccepted != 3 || v.Added != 3 || v.Acquires != 3 || v.Clients != 2 || v.Losses != 0 {
		t.Errorf("counts: %+v", v)
	}
	if v.Duration != 62*time.Millisecond {
		t.Errorf("duration %v", v.Duration)
	}
}

func TestCheckFindsEachViolation(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *hist)
		want  map[Kind]int
	}{
		{"lease overlap", func(b *hist) {
			b.cycle(1, 10, 10, 50, 1000)
			b.cycle(2, 11, 30, 60, 1000) // granted while 1 holds
		}, map[Kind]int{LeaseOverlap: 1, SectionOverlap: 1}},
		{"no overlap once Until passed", func(b *hist) {
			// Client 1's lease ran out at 40 (it was paused, say); its
			// Done came late, but validity ends at Until.
			b.add(9, Event{Op: OpAcquire, Client: 1})
			b.add(10, Event{Op: OpGrant, Client: 1, Fence: 10, Until: b.at(40)})
			b.add(90, Event{Op: OpDone, Client: 1, Fence: 10, Err: "lost"})
			b.cycle(2, 11, 60, 70, 1000)
		}, map[Kind]int{}},
		{"fence regression", func(b *hist) {
			b.cycle(1, 10, 10, 20, 1000)
			b.add(30, Event{Op: OpGrant, Client: 2, Fence: 9, Until: b.at(1030)})
		}, map[Kind]int{FenceRegression: 1}},
		{"stale write accepted by a broken register", func(b *hist) {
			b.cycle(1, 10, 10, 20, 1000)
			b.cycle(2, 11, 30, 40, 1000)
			b.add(50, Event{Op: OpWrite, Client: 1, Fence: 10, Value: "late"})
		}, map[Kind]int{StaleWrite: 1}},
		{"stale write accepted because fences went backwards", func(b *hist) {
			b.cycle(1, 20, 10, 20, 1000)
			b.cycle(2, 11, 30, 40, 1000) // a regression: 11 after 20
			b.add(35, Event{Op: OpWrite, Client: 1, Fence: 20, Value: "late"})
		}, map[Kind]int{FenceRegression: 1, StaleWrite: 2}},
		{"latest holder refused", func(b *hist) {
			b.cycle(1, 20, 10, 20, 1000)
			b.add(30, Event{Op: OpGrant, Client: 2, Fence: 11, Until: b.at(1030)})
			b.add(31, Event{Op: OpRefused, Client: 2, Fence: 11, Max: 20})
		}, map[Kind]int{FenceRegression: 1, HolderRefused: 1}},
		{"a grant told late whose call began before the other's grant", func(b *hist) {
			// Client 2's Lock was under way when client 1 was granted: the
			// server may have granted client 2 first (its key then lost
			// early, as the expire fault does), so its lower fence, told
			// later, is no regression, and refusing its write is fencing
			// at work (chaos redis/library-defaults, fault expire).
			b.add(5, Event{Op: OpAcquire, Client: 2})
			b.add(8, Event{Op: OpFault, Fault: FaultExpire, Target: "node 1"})
			b.add(9, Event{Op: OpHeal})
			b.cycle(1, 20, 10, 20, 1000)
			b.add(30, Event{Op: OpGrant, Client: 2, Fence: 11, Until: b.at(1030)})
			b.add(31, Event{Op: OpRefused, Client: 2, Fence: 11, Max: 20})
		}, map[Kind]int{}},
		{"a grant told late with no fault to lose its key", func(b *hist) {
			// As above, but nothing can have lost client 2's key early: had
			// the server granted client 2 first, it granted client 1 while
			// client 2 held; it did not, so fence 11 came after fence 20.
			b.add(5, Event{Op: OpAcquire, Client: 2})
			b.cycle(1, 20, 10, 20, 1000)
			b.add(30, Event{Op: OpGrant, Client: 2, Fence: 11, Until: b.at(1030)})
			b.add(31, Event{Op: OpRefused, Client: 2, Fence: 11, Max: 20})
		}, map[Kind]int{FenceRegression: 1, HolderRefused: 1}},
		{"a regression whose call began after the other's grant", func(b *hist) {
			b.cycle(1, 20, 10, 20, 1000)
			b.add(25, Event{Op: OpAcquire, Client: 2})
			b.add(30, Event{Op: OpGrant, Client: 2, Fence: 11, Until: b.at(1030)})
			b.add(31, Event{Op: OpRefused, Client: 2, Fence: 11, Max: 20})
		}, map[Kind]int{FenceRegression: 1, HolderRefused: 1}},
		{"a regression below an earlier grant than the highest", func(b *hist) {
			// Client 3's call began after client 1 had been granted fence
			// 10, so its fence 5 is a regression, however client 2's fence
			// 20, granted while client 3's call was under way, is judged.
			b.cycle(1, 10, 10, 20, 1000)
			b.add(25, Event{Op: OpAcquire, Client: 3})
			b.cycle(2, 20, 30, 35, 1000)
			b.add(40, Event{Op: OpGrant, Client: 3, Fence: 5, Until: b.at(1040)})
			b.add(45, Event{Op: OpRelease, Client: 3, Fence: 5})
			b.add(45, Event{Op: OpDone, Client: 3, Fence: 5, Err: "released"})
		}, map[Kind]int{FenceRegression: 1}},
		{"stale refusal is fencing at work", func(b *hist) {
			b.cycle(1, 10, 10, 20, 1000)
			b.cycle(2, 11, 30, 40, 1000)
			b.add(50, Event{Op: OpRefused, Client: 1, Fence: 10, Max: 11})
		}, map[Kind]int{}},
		{"lost update", func(b *hist) {
			b.cycle(1, 10, 10, 20, 1000)
			b.cycle(2, 11, 30, 40, 1000)
			b.add(50, Event{Op: OpFinal, Values: []string{"vc1"}})
		}, map[Kind]int{LostUpdate: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHist().add(0, Event{Op: OpStart})
			tt.build(b)
			b.add(2000, Event{Op: OpStop})
			v := b.check(BackendRedlock3)
			got := kinds(v)
			if len(got) != len(tt.want) {
				t.Fatalf("violations %v; want %v\n%+v", got, tt.want, v.Violations)
			}
			for k, n := range tt.want {
				if got[k] != n {
					t.Errorf("%d of %s; want %d\n%+v", got[k], k, n, v.Violations)
				}
			}
			if len(tt.want) > 0 && v.OK() {
				t.Errorf("verdict OK with violations outside any fault")
			}
			for _, x := range v.Violations {
				if x.Detail == "" || len(x.Clients) == 0 || x.At == 0 {
					t.Errorf("violation without detail, clients or time: %+v", x)
				}
			}
		})
	}
}

func TestCheckStaleRefusedCounted(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.cycle(1, 10, 10, 20, 1000).cycle(2, 11, 30, 40, 1000)
	b.add(50, Event{Op: OpRefused, Client: 1, Fence: 10, Max: 11})
	b.add(60, Event{Op: OpStop})
	if v := b.check(BackendRedis); v.StaleRefused != 1 || !v.OK() {
		t.Errorf("StaleRefused %d, OK %v; want 1, true", v.StaleRefused, v.OK())
	}
}

// A violation in the window of a fault that the backend's documented
// limits allow is explained; the same violation after another fault, or on
// another backend, is not.
func TestCheckAttributesToFaults(t *testing.T) {
	build := func(fault string) *hist {
		b := newHist().add(0, Event{Op: OpStart})
		b.add(5, Event{Op: OpFault, Fault: fault, Target: "node 1"})
		b.add(6, Event{Op: OpHeal})
		b.cycle(1, 10, 10, 50, 1000)
		b.cycle(2, 11, 30, 60, 1000)
		b.add(3000, Event{Op: OpStop})
		return b
	}
	v := build(FaultKillEmpty).check(BackendRedis)
	if !v.OK() || len(v.Violations) != 2 {
		t.Fatalf("overlap after kill-empty on redis: %+v", v.Violations)
	}
	for _, x := range v.Violations {
		if x.Fault != "kill-empty node 1" || !strings.Contains(x.Limit, "forgets the lock") {
			t.Errorf("violation %+v: want it put down to kill-empty node 1, with the limit", x)
		}
	}
	if v := build(FaultKillEmpty).check(BackendRedlock3); v.OK() {
		t.Errorf("overlap after kill-empty on redlock3 judged OK: %+v", v.Violations)
	}
	// On Redlock an early expiry is a limit only where it left less than
	// a majority holding the key.
	if v := build(FaultExpireBare).check(BackendRedlock3); !v.OK() {
		t.Errorf("overlap after expire-bare on redlock3 judged a failure: %+v", v.Violations)
	}
	if v := build(FaultExpire).check(BackendRedlock5); v.OK() {
		t.Errorf("overlap after expire on redlock5 judged OK: %+v", v.Violations)
	}
	if v := build(FaultLatency).check(BackendRedis); v.OK() {
		t.Errorf("overlap after latency on redis judged OK: %+v", v.Violations)
	}
	// Outside the window (1s after the heal) nothing is explained.
	b := newHist().add(0, Event{Op: OpStart})
	b.add(5, Event{Op: OpFault, Fault: FaultKillEmpty}).add(6, Event{Op: OpHeal})
	b.cycle(1, 10, 1100, 1150, 1000).cycle(2, 11, 1120, 1160, 1000)
	b.add(3000, Event{Op: OpStop})
	if v := b.check(BackendRedis); v.OK() {
		t.Errorf("overlap 1.1s after the fault judged OK: %+v", v.Violations)
	}
}

func TestCheckRecoveries(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.add(100, Event{Op: OpFault, Fault: FaultKill, Target: "node 2"})
	b.add(300, Event{Op: OpHeal})
	b.cycle(1, 10, 450, 460, 1000)
	b.add(500, Event{Op: OpFault, Fault: FaultPause})
	b.add(600, Event{Op: OpStop})
	v := b.check(BackendRedis)
	if len(v.Recoveries) != 2 {
		t.Fatalf("recoveries %+v", v.Recoveries)
	}
	r := v.Recoveries[0]
	if r.Fault != "kill node 2" || r.FromStart != 350*time.Millisecond || r.FromHeal != 150*time.Millisecond || r.Lasted != 200*time.Millisecond {
		t.Errorf("recovery %+v", r)
	}
	if r := v.Recoveries[1]; r.FromStart != -1 || r.FromHeal != -1 {
		t.Errorf("no grant after the second fault, yet %+v", r)
	}
}

// A holder that stays in its section after its lease ended (its Until
// passed before the next grant) was stalled by its machine, with or
// without a client-pause fault: the lock held, and the overlap is the
// documented client-pause limit (a loaded CI machine stalled a chaos
// client 472ms in a 20ms section). Two valid leases at once stay
// unexplained.
func TestCheckStalledHolderIsExplained(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.add(9, Event{Op: OpAcquire, Client: 1})
	b.add(10, Event{Op: OpGrant, Client: 1, Fence: 10, Until: b.at(40)})
	b.add(10, Event{Op: OpEnter, Client: 1, Fence: 10})
	b.cycle(2, 11, 60, 70, 1000)
	b.add(100, Event{Op: OpExit, Client: 1, Fence: 10})
	b.add(101, Event{Op: OpStop})
	v := b.check(BackendZK3)
	if len(v.Violations) != 1 || v.Violations[0].Kind != SectionOverlap || !v.Violations[0].Explained() {
		t.Fatalf("a stalled holder's section overlap: %+v; want one, explained as a client pause", v.Violations)
	}
	b = newHist().add(0, Event{Op: OpStart})
	b.cycle(1, 10, 10, 50, 1000)
	b.cycle(2, 11, 30, 60, 1000)
	b.add(61, Event{Op: OpStop})
	for _, x := range b.check(BackendZK3).Violations {
		if x.Explained() {
			t.Errorf("%s with both leases valid explained: %s", x.Kind, x.Limit)
		}
	}
}

func TestCheckCrashedClientEndsItsSection(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.add(10, Event{Op: OpGrant, Client: 1, Fence: 10, Until: b.at(30)})
	b.add(10, Event{Op: OpEnter, Client: 1, Fence: 10})
	b.add(20, Event{Op: OpCrashed, Client: 1, Err: "killed"})
	b.cycle(2, 11, 40, 50, 1000)
	b.add(100, Event{Op: OpStop})
	v := b.check(BackendRedis)
	if len(v.Violations) != 0 || v.Crashes != 1 {
		t.Errorf("crash: %+v, crashes %d", v.Violations, v.Crashes)
	}
}

// A stale write accepted, a fence regression or a refused holder is
// excused only where two masters grant at once: Sentinel or Cluster
// without WithReplicas, during a failover (on Cluster, not a partition).
func TestExpectNeverExcusesFencing(t *testing.T) {
	for _, backend := range Backends {
		for _, f := range recordedFaults(backend) {
			failover := f == FaultMasterKill || f == FaultMasterPause || f == FaultMasterPartition
			splitBrain := failover && backend == BackendSentinel || backend == BackendCluster && f == FaultMasterPause
			for _, k := range []Kind{StaleWrite, FenceRegression, HolderRefused} {
				if excused := Expect(backend, f, k) != ""; excused != splitBrain {
					t.Errorf("Expect(%s, %s, %s) excuses it: %v", backend, f, k, excused)
				}
			}
			// Every fault heals, and the register is the harness's own.
			for _, k := range []Kind{LockFailed, NotLinearizable, LinearizabilityUnknown} {
				if why := Expect(backend, f, k); why != "" {
					t.Errorf("Expect(%s, %s, %s) excuses it: %s", backend, f, k, why)
				}
			}
		}
	}
	if got := Allowed(BackendRedlock5, FaultKillEmpty); len(got) != 0 {
		t.Errorf("Redlock allows %v after kill-empty; its restart detection should allow nothing", got)
	}
	if got := Allowed(BackendRedisAOF, FaultKill); len(got) != 0 {
		t.Errorf("redis-aof allows %v after kill; fsync always should allow nothing", got)
	}
	// pglock's doc promises both modes that no one takes the row before it
	// expires, whatever becomes of the holder's session or the server's
	// processes, so long as the database keeps what it committed.
	for _, b := range []string{BackendPostgres, BackendPostgresSession} {
		for _, f := range FaultsFor(b) {
			want := []Kind(nil)
			if f == FaultClientPause {
				want = []Kind{SectionOverlap, LostUpdate}
			}
			if got := Allowed(b, f); !slices.Equal(got, want) {
				t.Errorf("%s allows %v after %s; want %v", b, got, f, want)
			}
		}
	}
	for _, f := range []string{FaultKillEmpty, FaultKillEmptyAll} {
		if got := Allowed(BackendZK3, f); len(got) != 0 {
			t.Errorf("zk3 allows %v after %s; its Sessions' leases end before they give their sessions up", got, f)
		}
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	b := newHist().cycle(1, 10, 10, 20, 1000)
	var sb strings.Builder
	if err := b.h.WriteJSONLines(&sb); err != nil {
		t.Fatal(err)
	}
	h, err := ReadHistory(strings.NewReader(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != b.h.Len() {
		t.Errorf("read %d events; wrote %d", h.Len(), b.h.Len())
	}
	if _, err := ReadHistory(strings.NewReader(`{"op":"grant"}`)); err == nil {
		t.Errorf("an event without a time was accepted")
	}
	if _, err := ReadHistory(strings.NewReader(`{"at":1,"op":`)); err == nil {
		t.Errorf("a truncated history was accepted")
	}
}

func TestTimelineShowsEverything(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.add(5, Event{Op: OpFault, Fault: FaultKillEmpty, Target: "node 1"}).add(6, Event{Op: OpHeal})
	b.cycle(1, 10, 10, 50, 1000).cycle(2, 11, 30, 60, 1000)
	b.add(70, Event{Op: OpRefused, Client: 1, Fence: 10, Max: 11})
	b.add(80, Event{Op: OpFail, Client: 2, Class: LockError, Err: "EOF"})
	b.regWrite(1, 10, "a", 90, 91, true).regRead(2, 95, 96, 10, "a")
	b.add(2000, Event{Op: OpStop})
	r := &Result{Options: Options{Backend: BackendRedis, Clients: 2, Seed: 7}, History: &b.h, Verdict: b.check(BackendRedis)}
	var sb strings.Builder
	if err := WriteTimeline(&sb, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	page := sb.String()
	for _, want := range []string{"<svg", "client 2", "kill-empty", "fence 11", "refused", "#ff9f1c", "seed 7", "</html>",
		"1 Lock calls failed instead of waiting", "register linearizable", "heal to grant, median", "<td>kill-empty</td><td>1</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
	if n := strings.Count(page, "#d62728\" stroke-width"); n != 1 {
		t.Errorf("%d violations drawn as unexplained; want the Lock failure alone", n)
	}
}

func TestSummaryNamesUnexplainedViolations(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.add(5, Event{Op: OpFault, Fault: FaultLatency, Target: "node 1"}).add(6, Event{Op: OpHeal})
	b.cycle(1, 10, 10, 50, 1000).cycle(2, 11, 30, 60, 1000)
	b.add(70, Event{Op: OpFail, Client: 3, Class: LockUnavailable, Err: "dlock: node 1 unavailable"})
	b.add(2000, Event{Op: OpStop})
	r := &Result{Options: Options{Backend: BackendRedlock3, Seed: 3}, History: &b.h, Verdict: b.check(BackendRedlock3)}
	var sb strings.Builder
	if err := WriteSummary(&sb, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	failed := "FAIL: 2 unexplained (1 Lock failures not enforced yet)"
	if enforceLockWaits {
		failed = "FAIL: 3 unexplained"
	}
	for _, want := range []string{"redlock3", failed, "VIOLATION lease-overlap at 30ms", "(during or after latency node 1)", "latency", "seed 3",
		"LOCK FAILED", "REGISTER", "linearizable", "heal→grant median", "VIOLATION lock-failed at 70ms: client 3's Lock call failed instead of waiting (unavailable): dlock: node 1 unavailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// Lock calls that failed before their context ended are LockFailed
// violations, never within the limits, put down to the fault in force and
// counted by fault; a call that waited out its context is not one.
func TestCheckLockFailures(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.add(100, Event{Op: OpFault, Fault: FaultKill, Target: "node 1"})
	b.add(150, Event{Op: OpFail, Client: 1, Class: LockError, Err: "EOF"})
	b.add(160, Event{Op: OpFail, Client: 2, Class: LockUnavailable, Err: "dlock: 127.0.0.1:1 unavailable"})
	b.add(170, Event{Op: OpFail, Client: 3, Class: LockTimedOut, Err: "dlock: lock not obtained: context deadline exceeded"})
	b.add(300, Event{Op: OpHeal})
	b.cycle(1, 10, 400, 410, 1000)
	b.add(5000, Event{Op: OpFail, Client: 2, Class: LockNotObtained, Err: "dlock: lock not obtained"}) // outside every window
	// A history from before Class was recorded.
	b.add(5100, Event{Op: OpFail, Client: 3, Err: "dlock: lock not obtained: context deadline exceeded"})
	b.add(6000, Event{Op: OpStop})
	for _, backend := range []string{BackendRedis, BackendSentinel, BackendZK3} {
		v := b.check(backend)
		if v.LockFailures != 3 || v.FailedAcquires != 5 || kinds(v)[LockFailed] != 3 || len(v.Violations) != 3 {
			t.Fatalf("%s: %d Lock failures, %d failed acquires, violations %+v; want 3, 5 and 3 lock-failed",
				backend, v.LockFailures, v.FailedAcquires, v.Violations)
		}
		if n := len(v.Unexplained()); n != 3 {
			t.Errorf("%s: %d unexplained; want every Lock failure outside the limits", backend, n)
		}
		if got := len(v.Failures()) > 0; got != enforceLockWaits || v.OK() == enforceLockWaits {
			t.Errorf("%s: Failures %v, OK %v with enforceLockWaits %v", backend, v.Failures(), v.OK(), enforceLockWaits)
		}
		x := v.Violations[0]
		if x.Fault != "kill node 1" || !strings.Contains(x.Detail, "EOF") || !slices.Equal(x.Clients, []int{1}) {
			t.Errorf("%s: %+v; want it put down to kill node 1, naming the error and the client", backend, x)
		}
		want := []Liveness{{Fault: FaultKill, Faults: 1, Followed: 1, HealMedian: 100 * time.Millisecond,
			HealP99: 100 * time.Millisecond, HealMax: 100 * time.Millisecond, StartMedian: 300 * time.Millisecond,
			StartMax: 300 * time.Millisecond, LockFailed: 2}, {Fault: "", LockFailed: 1}}
		if !slices.Equal(v.Liveness, want) {
			t.Errorf("%s: liveness %+v; want %+v", backend, v.Liveness, want)
		}
	}
	// With no Lock failure, and once enforced, OK follows Unexplained.
	if v := newHist().cycle(1, 10, 10, 20, 1000).check(BackendRedis); len(v.Failures()) != 0 || !v.OK() || v.LockFailures != 0 {
		t.Errorf("a clean history: %+v", v)
	}
}

// The time from each fault's end to the next grant is summed up by kind
// of fault: median, 99th percentile by nearest rank, longest.
func TestCheckLiveness(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	at := 100
	for i, ms := range []int{30, 10, 20, 40, 1200} { // heal to grant; the window, and target, is 1s
		b.add(at, Event{Op: OpFault, Fault: FaultPause, Target: "node 1"})
		b.add(at+50, Event{Op: OpHeal})
		b.cycle(1, uint64(10+i), at+50+ms, at+50+ms+5, 1000)
		at += 3000
	}
	b.add(at, Event{Op: OpFault, Fault: FaultReset}).add(at, Event{Op: OpHeal}) // the last: no grant after it
	b.add(at+100, Event{Op: OpStop})
	v := b.check(BackendRedis)
	if len(v.Liveness) != 2 {
		t.Fatalf("liveness %+v", v.Liveness)
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	p := v.Liveness[0]
	if p.Fault != FaultPause || p.Faults != 5 || p.Followed != 5 || p.HealMedian != ms(30) || p.HealP99 != ms(1200) ||
		p.HealMax != ms(1200) || p.StartMedian != ms(80) || p.StartMax != ms(1250) || p.OverTarget != 1 {
		t.Errorf("pause: %+v", p)
	}
	if v.LivenessTarget != time.Second {
		t.Errorf("liveness target %v; want the window, 1s", v.LivenessTarget)
	}
	// The last fault had no time for a grant: not over the target.
	if r := v.Liveness[1]; r.Fault != FaultReset || r.Faults != 1 || r.Followed != 0 || r.HealMax != 0 || r.OverTarget != 0 {
		t.Errorf("reset: %+v", r)
	}
	ds := make([]time.Duration, 200)
	for i := range ds {
		ds[i] = time.Duration(i + 1)
	}
	if p99 := percentile(ds, 99); p99 != 198 {
		t.Errorf("99th percentile of 1..200: %v; want 198", p99)
	}
	if p99 := percentile(ds[:1], 99); p99 != 1 {
		t.Errorf("99th percentile of one: %v", p99)
	}
}

// reg records a client's call to the fenced register and its reply, at
// times in milliseconds from t0.
func (b *hist) regWrite(client int, fence uint64, value string, call, reply int, accepted bool) *hist {
	b.add(call, Event{Op: OpRegWrite, Client: client, Fence: fence, Value: value})
	if reply < 0 {
		return b // no reply: the client stopped first
	}
	r := Event{Op: OpRegReply, Client: client, Fence: fence, Value: value}
	if !accepted {
		r.Err = "refused"
	}
	return b.add(reply, r)
}

func (b *hist) regRead(client int, call, reply int, fence uint64, value string) *hist {
	b.add(call, Event{Op: OpRegRead, Client: client})
	return b.add(reply, Event{Op: OpRegReply, Client: client, Fence: fence, Value: value})
}

// The clients' calls to the fenced register are checked for
// linearizability against a model of the register: a write reported
// accepted is seen by every later read (until a higher fence), a refused
// write never is. A write reported done but lost, as fence.Row.Update's on
// MariaDB at REPEATABLE READ was (issue 31), fails the run, and so does a
// refused write that becomes visible.
func TestCheckRegisterLinearizable(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *hist)
		want  string
	}{
		{"sequential", func(b *hist) {
			b.regRead(1, 10, 11, 0, "")
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regRead(2, 20, 21, 10, "a")
			b.regWrite(2, 11, "b", 22, 23, true)
			b.regWrite(1, 10, "late", 30, 31, false) // a superseded holder, refused
			b.regRead(3, 40, 41, 11, "b")
		}, RegisterLinearizable},
		{"a write reported done but lost", func(b *hist) {
			b.regRead(1, 10, 11, 0, "")
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regRead(2, 20, 21, 0, "") // does not see it
			b.regWrite(2, 11, "b", 22, 23, true)
		}, RegisterNotLinearizable},
		{"a write reported done, then replaced by an older value", func(b *hist) {
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regWrite(2, 11, "b", 22, 23, true)
			b.regRead(3, 30, 31, 10, "a")
		}, RegisterNotLinearizable},
		{"a refused write becomes visible", func(b *hist) {
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regWrite(2, 9, "stale", 22, 23, false)
			b.regRead(3, 30, 31, 9, "stale")
		}, RegisterNotLinearizable},
		{"a stale write accepted", func(b *hist) {
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regWrite(2, 9, "stale", 22, 23, true)
		}, RegisterNotLinearizable},
		{"the current holder refused", func(b *hist) {
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regWrite(2, 11, "b", 22, 23, false)
		}, RegisterNotLinearizable},
		{"a read of a value never written", func(b *hist) {
			b.regRead(1, 10, 11, 7, "ghost")
		}, RegisterNotLinearizable},
		{"a read during a write sees either", func(b *hist) {
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regWrite(2, 11, "b", 20, 30, true)
			b.regRead(3, 21, 22, 10, "a")
			b.regRead(4, 23, 24, 11, "b")
			b.regRead(3, 40, 41, 11, "b")
		}, RegisterLinearizable},
		{"but not back again", func(b *hist) {
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regWrite(2, 11, "b", 20, 30, true)
			b.regRead(3, 21, 22, 11, "b")
			b.regRead(4, 23, 24, 10, "a")
		}, RegisterNotLinearizable},
		{"a write with no reply may have landed", func(b *hist) {
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regWrite(2, 11, "b", 20, -1, false)
			b.regRead(3, 30, 31, 11, "b")
		}, RegisterLinearizable},
		{"or not", func(b *hist) {
			b.regWrite(1, 10, "a", 12, 13, true)
			b.regWrite(2, 11, "b", 20, -1, false)
			b.regRead(3, 30, 31, 10, "a")
		}, RegisterLinearizable},
		{"no calls", func(b *hist) {}, RegisterLinearizable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newHist().add(0, Event{Op: OpStart})
			tt.build(b)
			b.add(100, Event{Op: OpStop})
			v := b.check(BackendRedis)
			if v.Register != tt.want {
				t.Fatalf("register %s; want %s; violations %+v", v.Register, tt.want, v.Violations)
			}
			n := kinds(v)[NotLinearizable]
			if ok := tt.want == RegisterLinearizable; v.OK() != ok || (n == 0) != ok || len(v.Violations) != n {
				t.Errorf("OK %v with %d not-linearizable of %d violations: %+v", v.OK(), n, len(v.Violations), v.Violations)
			}
			for _, x := range v.Violations {
				if x.Limit != "" || !strings.Contains(x.Detail, "client ") || len(x.Clients) == 0 {
					t.Errorf("violation %+v: want no limit, the calls and their clients", x)
				}
				t.Log(x.Detail)
			}
		})
	}
	// A fault in force explains nothing of it, on any backend.
	b := newHist().add(0, Event{Op: OpStart})
	b.add(5, Event{Op: OpFault, Fault: FaultMasterPause, Target: "node 1"})
	b.regWrite(1, 10, "a", 12, 13, true).regRead(2, 20, 21, 0, "")
	b.add(30, Event{Op: OpHeal}).add(100, Event{Op: OpStop})
	if v := b.check(BackendSentinel); v.OK() || v.Register != RegisterNotLinearizable {
		t.Errorf("a lost write during a split brain judged OK: %+v", v.Violations)
	}
}

// The linearizability check gives up when its budget runs out, and says
// so: the run fails with LinearizabilityUnknown, it does not pass.
func TestCheckRegisterUnknownFails(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.regWrite(1, 10, "a", 12, 13, true).regRead(2, 20, 21, 10, "a")
	b.add(100, Event{Op: OpStop})
	v := Check(&b.h, CheckConfig{Backend: BackendRedis, Window: time.Second, LinearizabilityBudget: time.Nanosecond})
	if v.Register != RegisterUnknown || v.OK() || kinds(v)[LinearizabilityUnknown] != 1 {
		t.Errorf("register %s, OK %v, violations %+v; want unknown, a failure", v.Register, v.OK(), v.Violations)
	}
}

// The check cuts the history at every read that overlaps no other call,
// so its work grows with the run, not exponentially: a run four times as
// long takes about four times as long to check (at most twelve, which a
// loaded machine's noise stays under and an exponential check does not).
// Wall time alone is no measure beside other tests on a loaded machine.
func TestCheckRegisterScales(t *testing.T) {
	check := func(cycles int) (time.Duration, *Verdict) {
		b := newHist().add(0, Event{Op: OpStart})
		fence := uint64(0)
		var value string
		at := 10
		for i := range cycles {
			c := i%5 + 1
			b.regRead(c, at, at+1, fence, value)
			fence++
			value = fmt.Sprintf("c%d-%d", c, i)
			b.regWrite(c, fence, value, at+2, at+3, true)
			if i%100 == 0 { // a paused client's late write, overlapping the next holder's calls
				b.regWrite(c%5+1, fence-1, "late", at+4, at+7, false)
				b.regRead(c, at+5, at+6, fence, value)
			}
			at += 10
		}
		b.add(at, Event{Op: OpStop})
		began := time.Now()
		v := b.check(BackendRedis)
		return time.Since(began), v
	}
	short := time.Duration(math.MaxInt64)
	for range 2 {
		took, _ := check(5000)
		short = min(short, took)
	}
	took, v := check(20000)
	t.Logf("%d calls checked in %v; a quarter of the run in %v", v.RegisterOps, took, short)
	if v.Register != RegisterLinearizable || v.RegisterOps != 40400 {
		t.Fatalf("register %s, %d calls: %+v", v.Register, v.RegisterOps, v.Violations)
	}
	if took > 12*short {
		t.Errorf("checking %d calls took %v, %.1f times a quarter of the run; want about 4", v.RegisterOps, took, float64(took)/float64(short))
	}
}

// A client records the class of each failed Lock call: only a call whose
// own context ended waited.
func TestLockClass(t *testing.T) {
	since := time.Now().Add(-time.Second)
	tests := []struct {
		err      error
		timedOut bool
		want     string
	}{
		{dlock.NotObtained(context.DeadlineExceeded), true, LockTimedOut},
		{errors.Join(dlock.NotObtained(context.DeadlineExceeded), dlock.Unavailable("127.0.0.1:1", since, io.EOF)), true, LockTimedOut},
		{io.EOF, true, LockTimedOut},
		{dlock.Unavailable("127.0.0.1:1", since, io.EOF), false, LockUnavailable},
		{dlock.NotObtained(errors.New("given back")), false, LockNotObtained},
		{fmt.Errorf("redislock: %w", io.EOF), false, LockError},
	}
	for _, tt := range tests {
		if got := lockClass(tt.err, tt.timedOut); got != tt.want {
			t.Errorf("lockClass(%v, %v) = %s; want %s", tt.err, tt.timedOut, got, tt.want)
		}
	}
}
