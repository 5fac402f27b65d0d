package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// The short chaos run of make test: every backend for a few seconds, with
// the most telling faults round-robin (FaultsFor lists them first). It
// fails on any violation outside the documented limits, a stale fenced
// write accepted, a fence regression or a register history that is not
// linearizable above all (a Lock call that failed instead of waiting only
// once enforceLockWaits is set), and checks that the run did its work:
// faults injected, grants after each of them. Each case has servers of its
// own, and a run spends most of its time waiting (for a quiet window, a
// failover, an ensemble to form), so the cases run in parallel, as many
// at once as -test.parallel allows, but for Redlock's (see below).
func TestIntegrationChaos(t *testing.T) {
	testenv.SkipIfShort(t, "runs servers and faults for a minute")
	testenv.RequireBinary(t, "redis-server")
	t.Parallel()
	cases := []struct {
		backend  string
		duration time.Duration
		faults   int      // at least
		defaults bool     // clients built as the README says (library timeouts and retries)
		tls      bool     // through TLS, with passwords (Options.TLS)
		only     []string // the faults to inject; all that apply if nil
	}{
		{BackendRedis, 12 * time.Second, 4, false, false, nil},
		{BackendRedis, 8 * time.Second, 2, true, false, nil},
		{BackendRedisAOF, 8 * time.Second, 2, false, false, nil},
		{BackendRedlock3, 12 * time.Second, 4, false, false, nil},
		{BackendRedlock3, 8 * time.Second, 2, true, false, nil},
		{BackendRedlock3RDB, 8 * time.Second, 3, false, false, []string{FaultKill}},
		{BackendRedlock5, 8 * time.Second, 2, false, false, nil},
		{BackendZK3, 16 * time.Second, 3, false, false, nil},
		// An empty ensemble takes seconds to form and the old Sessions a
		// session timeout to give up: one fault, and a grant after it.
		{BackendZK3, 12 * time.Second, 1, false, false, []string{FaultKillEmptyAll}},
		{BackendEtcd3, 16 * time.Second, 3, false, false, nil},
		// With a 6s TTL (set below), so that the pause falls inside a
		// lease. The harness's 10ms sections rarely hold a lease across the
		// pause, so this run showed nothing on the unfixed code either;
		// etcdlock's TestIntegrationDeposedLeaderRenewal is the test that
		// reproduces the hole.
		{BackendEtcd3, 20 * time.Second, 1, false, false, []string{FaultLeaderPauseKill}},
		{BackendPostgres, 12 * time.Second, 4, false, false, nil},
		{BackendPostgresSession, 12 * time.Second, 4, false, false, nil},
		{BackendMariaDB, 12 * time.Second, 4, false, false, nil},
		{BackendMariaDBSession, 12 * time.Second, 4, false, false, nil},
		// A failover takes Sentinel 2-3s, and making the old master a
		// replica again 8-20s more, which the fault waits for (or for the
		// end of the run): one fault, two if the machine is quick.
		// Not master-partition and master-pause on sentinel: the old
		// master's grants there regress fences (docs/SAFETY.md, Sentinel).
		{BackendSentinel, 10 * time.Second, 1, false, false, []string{FaultMasterKill}},
		{BackendSentinelReplicas, 10 * time.Second, 1, false, false, []string{FaultMasterPartition, FaultMasterKill, FaultMasterPause}},
		// With replication cut, WithReplicas refuses every acquire until
		// it is healed (checked below); without, nothing shows.
		{BackendSentinelReplicas, 8 * time.Second, 2, false, false, []string{FaultReplicationCut}},
		// A Cluster fails over in 2-3s (node timeout 1s, then the
		// election) and the old master rejoins within seconds.
		{BackendCluster, 12 * time.Second, 2, false, false, []string{FaultMigrate, FaultMasterKill, FaultMasterPause}},
		{BackendClusterReplicas, 12 * time.Second, 2, false, false, []string{FaultMigrate, FaultMasterPartition, FaultMasterKill, FaultMasterPause}},
		// TLS with client certificates, and passwords: an ACL user on
		// Redis, digest authentication on ZooKeeper's secure client port.
		// A TTL of 2s: Redlock's node timeout (TTL/10 in the harness) must
		// hold a TLS handshake and the login on a new connection, which
		// under -race on a loaded machine can take longer than 50ms.
		{BackendRedlock3, 12 * time.Second, 1, false, true, nil},
		{BackendZK3, 12 * time.Second, 2, false, true, nil},
	}
	for _, tc := range cases {
		name := tc.backend
		if tc.defaults {
			name += "/library-defaults"
		}
		if tc.tls {
			name += "/tls"
		}
		if tc.only != nil {
			name += "/" + strings.Join(tc.only, ",")
		}
		t.Run(name, func(t *testing.T) {
			if !strings.HasPrefix(tc.backend, "redlock") {
				// Redlock's node timeout is a tenth of the TTL (100ms
				// here): beside another run on a loaded machine, a
				// majority of its servers did not answer in time once
				// in 30s (0-2 grants). Its cases run one at a time,
				// before the others start.
				t.Parallel()
				// Two cases at a time, whatever -parallel says: a case
				// runs its servers and five race-built client processes,
				// and four at once beside a second make test starved
				// them (0 grants in whole runs).
				chaosSlots <- struct{}{}
				defer func() { <-chaosSlots }()
			}
			if tc.backend == BackendZK3 {
				if err := testenv.LookZooKeeper(); err != nil {
					testenv.RequireBinary(t, "zookeeper") // fails in CI, skips with the hint elsewhere
				}
			}
			if tc.backend == BackendEtcd3 {
				testenv.RequireBinary(t, "etcd") // fails in CI, skips with the hint elsewhere
			}
			if tc.backend == BackendPostgres || tc.backend == BackendPostgresSession {
				if err := testenv.LookPostgres(); err != nil {
					testenv.RequireBinary(t, "postgres") // fails in CI, skips with the hint elsewhere
				}
			}
			if tc.backend == BackendMariaDB || tc.backend == BackendMariaDBSession {
				if err := testenv.LookMariaDB(); err != nil {
					testenv.RequireBinary(t, "mariadbd") // fails in CI, skips with the hint elsewhere
				}
			}
			o := Options{Backend: tc.backend, Duration: tc.duration, TTL: 500 * time.Millisecond,
				Work: 10 * time.Millisecond, SessionTimeout: time.Second, LibraryDefaults: tc.defaults, Faults: tc.only, TLS: tc.tls}
			if tc.tls && tc.backend != BackendZK3 {
				o.TTL = 2 * time.Second
			}
			if tc.tls && tc.backend == BackendRedlock3 {
				// A Redlock client's node timeout, TTL/10, must hold a TLS
				// handshake: at 200ms, two fresh clones beside other test
				// runs (load 15-35) saw 0 grants in 75s, every reconnection
				// cut off mid-handshake (see redlock.WithNodeTimeout).
				o.TTL = 4 * time.Second
			}
			if (tc.backend == BackendRedlock5 || tc.backend == BackendRedlock3 || tc.backend == BackendRedlock3RDB) && !tc.tls {
				// The clients' node timeout is TTL/10: at 500ms, 50ms, in
				// which a majority of five loaded Redis servers did not
				// answer once in 26s beside a second make test (0 grants);
				// at 1s, 100ms, still none in 51s with two make tests at
				// -p 3 (load 25); redlock3-rdb, left at 500ms, saw 0 grants
				// in 53s beside a second make test.
				o.TTL = 2 * time.Second
			}
			if tc.backend == BackendEtcd3 {
				// An etcd grant is three requests through Raft; under
				// -race on a loaded machine, after a member's pause, one
				// can take more than two thirds of a 500ms lease, which
				// the minimum validity at grant gives back: a fault then
				// saw no grant before the next (make test beside
				// another). The 10-minute runs use 1s too.
				o.TTL = time.Second
				if slices.Equal(tc.only, []string{FaultLeaderPauseKill}) {
					o.TTL = 6 * time.Second
				}
			}
			if slices.Equal(tc.only, []string{FaultKillEmptyAll}) {
				// A quiet time after the ensemble is back in which the
				// clients can do the grants checked below: with the
				// default (Window, 2.5s), make tests side by side (load
				// 15-59) restarted the ensemble three times in the
				// case's six times its nominal length, each start of
				// ZooKeeper's JVM taking up to 28s, and ended it with
				// 24-35 grants of the 50 it checks.
				o.Gap = 10 * time.Second
			}
			// The run lasts until it has done the work checked below;
			// tc.duration is what that took on a loaded machine (see
			// untilEnough), and six times it the most it may take: with
			// four test packages at once, a ZooKeeper ensemble restarted
			// without its data took 19s to grant again, and 3x ended
			// zk3/kill-empty-all with 17 grants of the 50 it checks.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			o.Duration = 6 * tc.duration
			o.Progress = untilEnough(tc.duration, tc.faults, cancel)
			res, err := Run(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			v := res.Verdict
			t.Logf("seed %d: %d grants, %d losses, %d faults, %d stale writes refused, %d violations (%d unexplained)",
				res.Options.Seed, v.Grants, v.Losses, v.Faults, v.StaleRefused, len(v.Violations), len(v.Unexplained()))
			for _, k := range Kinds {
				if all, explained := v.Count(k); all > 0 {
					t.Logf("%s: %d, %d of them within the documented limits", k, all, explained)
				}
			}
			var live strings.Builder
			writeLiveness(&live, v.Liveness)
			t.Logf("%d Lock calls failed instead of waiting; register %s (%d calls); by fault:\n%s",
				v.LockFailures, v.Register, v.RegisterOps, live.String())
			logLockFailures(t, res.History.Events())
			for _, x := range v.Failures() {
				t.Errorf("violation outside the documented limits: %s: %s (fault %q)", x.Kind, x.Detail, x.Fault)
			}
			if v.Register != RegisterLinearizable || v.RegisterOps < 2*v.Grants-2*v.Clients {
				t.Errorf("register %s, %d calls checked for %d grants; want linearizable, a read and a write a grant",
					v.Register, v.RegisterOps, v.Grants)
			}
			for _, n := range res.ClientNotes {
				t.Errorf("client failed: %s", n)
			}
			if v.Crashes > 0 {
				t.Errorf("%d clients crashed", v.Crashes)
			}
			if v.Faults < tc.faults || v.Grants < 50 {
				t.Errorf("%d faults and %d grants; want at least %d and 50", v.Faults, v.Grants, tc.faults)
			}
			for i, r := range v.Recoveries[:max(len(v.Recoveries)-1, 0)] {
				if r.FromStart < 0 {
					t.Errorf("no grant after fault %d (%s) although another fault followed", i+1, r.Fault)
				}
			}
			if tc.backend == BackendSentinelReplicas && slices.Equal(tc.only, []string{FaultReplicationCut}) {
				checkNoGrantWhileCut(t, res.History.Events(), o.TTL)
			}
			if slices.Contains(res.Options.Faults, FaultKillEmptyAll) && (len(v.Recoveries) == 0 || v.Recoveries[0].FromStart < 0) {
				t.Errorf("no grant after the ensemble restarted empty: the old Sessions did not give their sessions up")
			}
			terminates, ended, failovers := 0, 0, 0
			for _, e := range res.History.Events() {
				if e.Op == OpLog && strings.HasPrefix(e.Value, "failover:") {
					t.Log(e.Value)
					failovers++
				}
				if e.Op == OpLog && strings.Contains(e.Value, "chaos:") {
					t.Errorf("fault failed: %s", e.Value)
				}
				var n, c int
				if _, err := fmt.Sscanf(e.Value, "terminate: %d sessions of client %d ended", &n, &c); e.Op == OpLog && err == nil {
					terminates++
					ended += n
				}
			}
			if slices.Contains(res.Options.Faults, FaultMasterKill) && failovers == 0 {
				t.Errorf("no failover seen; want Sentinel to promote a replica")
			}
			if slices.Contains(res.Options.Faults, FaultTerminate) && (terminates == 0 || ended == 0) {
				t.Errorf("%d terminate faults ended %d sessions; want some of each", terminates, ended)
			}
		})
	}
}

// chaosSlots bounds the chaos cases that run at once.
var chaosSlots = make(chan struct{}, 2)

// untilEnough returns a Progress function that ends a run, by calling
// cancel, once it has done the work TestIntegrationChaos checks: 50
// grants, and faults faults each followed by a quiet Window (the next
// fault has begun), or faults faults begun by nominal, the run's
// duration before it ended on its work (a Sentinel failover takes a fault
// 8-20s to heal). A quick machine gets there sooner, a loaded one later:
// a fixed duration gave a loaded machine too few faults or grants, and a
// quick one more faults than the test asks for (the long runs of make
// chaos are the ones for depth). It also waits for a grant after the
// last fault ended: a run cut off while the service recovered says
// nothing of the recovery (zk3/kill-empty-all, with its 50 grants done
// before its one fault, ended as the ensemble came back, with "no grant
// after the ensemble restarted empty"). That grant is one made after the
// fault ended, as the checks count it (Progress.GrantedSinceFault), not
// one reported since: counting reports, a report that came late, of a
// grant made before the fault, ended runs that had no grant after their
// last fault.
func untilEnough(nominal time.Duration, faults int, cancel func()) func(Progress) {
	seen := 0 // faults seen begun
	return func(p Progress) {
		if p.Faults != seen || p.Fault != "" {
			seen = p.Faults
			return
		}
		recovered := p.Faults == 0 || p.GrantedSinceFault
		if recovered && p.Grants >= 50 && (p.Faults > faults || p.Faults == faults && p.Elapsed >= nominal) {
			cancel()
		}
	}
}

// untilEnough ends a run on a grant made after the last fault ended, not
// on a report that comes after it: a client paused by client-pause (or
// starved) reports a grant made before the pause only once it runs again.
func TestUntilEnoughWaitsForAGrantAfterTheFault(t *testing.T) {
	cancelled := false
	progress := untilEnough(10*time.Second, 4, func() { cancelled = true })
	for _, step := range []struct {
		p    Progress
		want bool
	}{
		{Progress{Elapsed: 11 * time.Second, Grants: 60, Faults: 4, Fault: FaultClientPause}, false},
		// The paused client's report of the grant it had just made when
		// it was stopped, written once it was let go.
		{Progress{Elapsed: 12 * time.Second, Grants: 61, Faults: 4}, false},
		{Progress{Elapsed: 12500 * time.Millisecond, Grants: 62, Faults: 4, GrantedSinceFault: true}, true},
	} {
		progress(step.p)
		if cancelled != step.want {
			t.Fatalf("after %+v: run ended %v; want %v", step.p, cancelled, step.want)
		}
	}
}

// The harness sees a real double grant: early expiry of the key on a
// single Redis hands the lock to a second client while the first still
// holds a valid lease. On one Redis that is a documented limit; judged as
// if it had happened on Redlock, where it is not, the same history fails.
//
// It runs before the package's parallel chaos cases, not beside them: two
// of those at once left its clients too slow to take the expired key
// before the holder's renewal (10 expiries, 0 overlaps, in make test).
func TestIntegrationChaosSeesDoubleGrant(t *testing.T) {
	testenv.SkipIfShort(t, "needs redis-server")
	testenv.RequireBinary(t, "redis-server")
	o := Options{Backend: BackendRedis, Duration: 6 * time.Second, TTL: 500 * time.Millisecond,
		Work: 10 * time.Millisecond, Faults: []string{FaultExpire}, Gap: 300 * time.Millisecond}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	v := res.Verdict
	all, explained := v.Count(LeaseOverlap)
	t.Logf("%d expiries, %d lease overlaps", v.Faults, all)
	if all == 0 || explained != all || !v.OK() {
		t.Fatalf("%d expiries gave %d lease overlaps, %d explained, OK %v; want some, all explained",
			v.Faults, all, explained, v.OK())
	}
	strict := Check(res.History, CheckConfig{Backend: BackendRedlock3, Window: o.Window()})
	if n, ex := strict.Count(LeaseOverlap); n != all || ex != 0 || strict.OK() {
		t.Errorf("judged as Redlock: %d lease overlaps, %d explained, OK %v; want %d, 0, false", n, ex, strict.OK(), all)
	}
}

// checkNoGrantWhileCut fails t for a grant in the first 0.9 TTL of a
// replication-cut (every cut lasts at least a TTL; its heal, recorded when
// the replicas have caught up, can take seconds more): with WithReplicas a
// grant needs a replica's acknowledgement. The one exception is a grant
// whose Lock call began before the cut and that came within a tenth of the
// TTL of it: its replica may have acknowledged just before the cut, the
// reply reaching the client after (one came 0.2ms after the cut began).
func checkNoGrantWhileCut(t *testing.T, events []Event, ttl time.Duration) {
	t.Helper()
	var cut Mono            // the latest cut's start, or 0 before any
	began := map[int]Mono{} // each client's latest Lock call
	n := 0
	for _, e := range events {
		switch {
		case e.Op == OpFault && e.Fault == FaultReplicationCut:
			cut, n = e.At, n+1
		case e.Op == OpAcquire:
			began[e.Client] = e.At
		case e.Op == OpGrant && cut != 0 && e.At.Sub(cut) < ttl*9/10:
			if began[e.Client] < cut && e.At.Sub(cut) < ttl/10 {
				t.Logf("client %d granted %v after replication-cut %d began, its Lock call %v before it", e.Client, e.At.Sub(cut), n, cut.Sub(began[e.Client]))
				continue
			}
			t.Errorf("client %d granted %v after replication-cut %d began; want none while replication is cut (at least a TTL, %v)", e.Client, e.At.Sub(cut), n, ttl)
		}
	}
	if n == 0 {
		t.Error("no replication-cut in the history")
	}
}

// logLockFailures logs the Lock calls that failed instead of waiting, by
// class, with the first error of each.
func logLockFailures(t *testing.T, events []Event) {
	n, first := map[string]int{}, map[string]string{}
	var classes []string
	for _, e := range events {
		if e.Op != OpFail || !failedInsteadOfWaiting(e) {
			continue
		}
		if n[e.Class]++; n[e.Class] == 1 {
			classes = append(classes, e.Class)
			first[e.Class] = e.Err
		}
	}
	for _, c := range classes {
		t.Logf("Lock failed instead of waiting (%s) %d times, first: %s", c, n[c], first[c])
	}
}
