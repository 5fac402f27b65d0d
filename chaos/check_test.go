package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"
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
		{"section outlives its lease", func(b *hist) {
			b.add(10, Event{Op: OpGrant, Client: 1, Fence: 10, Until: b.at(40)})
			b.add(10, Event{Op: OpEnter, Client: 1, Fence: 10})
			b.cycle(2, 11, 60, 70, 1000)
			b.add(100, Event{Op: OpExit, Client: 1, Fence: 10})
		}, map[Kind]int{SectionOverlap: 1}},
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
	b.add(2000, Event{Op: OpStop})
	r := &Result{Options: Options{Backend: BackendRedis, Clients: 2, Seed: 7}, History: &b.h, Verdict: b.check(BackendRedis)}
	var sb strings.Builder
	if err := WriteTimeline(&sb, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	page := sb.String()
	for _, want := range []string{"<svg", "client 2", "kill-empty", "fence 11", "refused", "#ff9f1c", "seed 7", "</html>"} {
		if !strings.Contains(page, want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
	if strings.Contains(page, "#d62728\" stroke-width") {
		t.Errorf("an explained violation drawn as unexplained")
	}
}

func TestSummaryNamesUnexplainedViolations(t *testing.T) {
	b := newHist().add(0, Event{Op: OpStart})
	b.add(5, Event{Op: OpFault, Fault: FaultLatency, Target: "node 1"}).add(6, Event{Op: OpHeal})
	b.cycle(1, 10, 10, 50, 1000).cycle(2, 11, 30, 60, 1000)
	b.add(2000, Event{Op: OpStop})
	r := &Result{Options: Options{Backend: BackendRedlock3, Seed: 3}, History: &b.h, Verdict: b.check(BackendRedlock3)}
	var sb strings.Builder
	if err := WriteSummary(&sb, []*Result{r}); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{"redlock3", "FAIL: 2 unexplained", "VIOLATION lease-overlap at 30ms", "(during or after latency node 1)", "latency", "seed 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
