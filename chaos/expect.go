package chaos

import "slices"

// The backends a run can target, each on local servers the harness starts.
const (
	BackendRedis       = "redis"        // one redis-server, no persistence
	BackendRedisAOF    = "redis-aof"    // one redis-server, append-only file with fsync always
	BackendRedlock3    = "redlock3"     // Redlock over 3 independent redis-servers, no persistence
	BackendRedlock3RDB = "redlock3-rdb" // Redlock over 3 redis-servers with RDB snapshots (see below)
	BackendRedlock5    = "redlock5"     // Redlock over 5
	BackendZK3         = "zk3"          // a ZooKeeper ensemble of 3
	BackendEtcd3       = "etcd3"        // an etcd cluster of 3; etcdlock.Mutex

	BackendPostgres        = "postgres"         // one PostgreSQL server, pglock's lease mode (Mutex)
	BackendPostgresSession = "postgres-session" // one PostgreSQL server, pglock's session mode (SessionMutex)

	BackendMariaDB        = "mariadb"         // one MariaDB server, mysqllock's lease mode (Mutex)
	BackendMariaDBSession = "mariadb-session" // one MariaDB server, mysqllock's session mode (SessionMutex, GET_LOCK)

	BackendSentinel         = "sentinel"          // a master, two replicas and three Sentinels; redislock.Mutex
	BackendSentinelReplicas = "sentinel-replicas" // the same; redislock.Mutex WithReplicas(1, …)

	BackendCluster         = "cluster"          // a Redis Cluster of 3 masters with a replica each; redislock.Mutex
	BackendClusterReplicas = "cluster-replicas" // the same; redislock.Mutex WithReplicas(1, …)
)

// On BackendRedlock3RDB each server saves an RDB snapshot every second
// when something changed (save 1 1), Redis's default kind of persistence:
// kill restarts a server from its last snapshot, which may predate the
// latest grants, so the server comes back without their keys but with an
// old epoch and old fence counters.

// Backends lists the backends in the order reports show them.
var Backends = []string{BackendRedis, BackendRedisAOF, BackendRedlock3, BackendRedlock3RDB, BackendRedlock5, BackendZK3,
	BackendEtcd3, BackendPostgres, BackendPostgresSession, BackendMariaDB, BackendMariaDBSession, BackendSentinel, BackendSentinelReplicas,
	BackendCluster, BackendClusterReplicas}

// The faults the scheduler injects. Node faults pick one server; holder
// faults pick the client holding the lock.
const (
	FaultKill         = "kill"           // kill -9 a server; restart it, with whatever it persisted
	FaultKillEmpty    = "kill-empty"     // kill -9 a server; restart it with its data deleted
	FaultPause        = "pause"          // SIGSTOP a server; SIGCONT at the end
	FaultLatency      = "latency"        // delay all traffic to one server, both ways
	FaultBlackhole    = "blackhole"      // drop all traffic to one server, both ways
	FaultReset        = "reset"          // reset every connection to one server
	FaultExpire       = "expire"         // expire the lock key on one server now (a clock jump)
	FaultExpireBare   = "expire-bare"    // Redlock: an expire recorded so when the holder's key stood on no more than a majority (not scheduled)
	FaultClientPause  = "client-pause"   // SIGSTOP the holder's process past its TTL
	FaultPartition    = "partition"      // Redis, PostgreSQL, MariaDB, etcd: cut the holder off from every server past its TTL
	FaultLeaderKill   = "leader-kill"    // ZooKeeper, etcd: kill -9 the leader; restart it
	FaultSession      = "session-expiry" // ZooKeeper: cut the holder off past its session timeout
	FaultKillEmptyAll = "kill-empty-all" // ZooKeeper: kill -9 every member; restart them all with their data deleted
	FaultTerminate    = "terminate"      // PostgreSQL, MariaDB: end every session of the holder (pg_terminate_backend, KILL CONNECTION)

	// Sentinel and Cluster: the master (on Cluster, the master of the
	// lock's slot) fails, a replica is promoted, the old master comes back
	// as a replica.
	FaultMasterKill      = "master-kill"      // kill -9 the master; restart it, empty, once a replica is promoted
	FaultMasterPause     = "master-pause"     // SIGSTOP the master until a replica is promoted; SIGCONT
	FaultMasterPartition = "master-partition" // cut the master off from its replicas and the Sentinels (Cluster: every other node), not the clients

	FaultMigrate        = "migrate"         // Cluster: move the lock's slot, keys and fence counter, to another master while it is held
	FaultReplicationCut = "replication-cut" // Sentinel: cut the master off from its replicas (not the Sentinels, nor the clients) for 1-3 TTL
)

// FaultLeaderPauseKill is an etcd fault: pin the holder to the leader's
// endpoint (as a load balancer in front would), SIGSTOP the leader long
// enough for an election, SIGCONT it and kill -9 it 10ms later; restart it
// and unpin the holder.
const FaultLeaderPauseKill = "leader-pause-kill"

// FaultsFor returns the faults that apply to backend, the most telling
// first: a round-robin schedule of a short run covers those.
func FaultsFor(backend string) []string {
	if s := serviceOf(backend); s != nil {
		return slices.Clone(s.faults[backend])
	}
	return nil
}

// enforceLockWaits says whether a Lock call that failed instead of waiting
// (LockFailed) fails a run: Verdict.OK, and with it make test's short runs
// and the exit code of dlock chaos. It is true: dlock.Locker's contract
// has every backend's Lock wait through transient faults. A backend being
// brought up may set it false for a while, to have such calls counted,
// reported and listed without failing the run.
const enforceLockWaits = true

// Reasons for the documented limits, as reports and docs/SAFETY.md give them.
const (
	limitClientPause = "a client paused past its TTL resumes inside its critical section after its lease ended; " +
		"nothing outside the client can stop it, so without fencing its late writes land (the fenced register refuses them)"
	limitForgot = "a single Redis that restarts without its data forgets the lock; another client takes it while " +
		"the old holder's lease is still valid by its own clock (the fenced register refuses the old holder's writes)"
	limitExpire = "the key expired early on the only server (a forward jump of its clock); another client takes the " +
		"lock while the holder's lease is still valid by its own clock (the fenced register refuses the old holder's writes)"

	limitBareMajority = "a Redlock node's key expired early (a forward jump of its clock) while the holder's key stood on " +
		"no more than a majority of the nodes: what is left is less than a majority, and another client takes the lock " +
		"while the holder's lease is still valid by its own clock (the fenced register refuses the old holder's writes)"

	limitFailover = "replication is asynchronous: a replica promoted by Sentinel or by the Cluster may lack the latest grant or " +
		"renewal, and an isolated old master keeps serving the clients still connected to it, so the new master " +
		"grants the lock while the old holder's lease is still valid (redislock.WithReplicas closes most of this)"
	limitSplitBrain = "while the old master (isolated, or back before Sentinel or the Cluster demotes it) and the promoted replica " +
		"both grant the lock, each draws fences from its own counter, lifted to its own clock: their fences " +
		"interleave, so fence order is not grant order; the fenced resource still never takes a lower fence " +
		"after a higher one, but it may refuse the newer holder and take the older one's writes"
	limitRenewal = "WithReplicas waits for a replica on acquire, not on renewal: a master cut off from its replicas " +
		"still renews its holder's lease, while the promoted replica's copy of the key expires on the older deadline " +
		"and the new master grants the lock before the old holder's Until"
)

// Expect returns why fault on backend may cause a violation of kind k (a
// documented physical limit), or "" if the violation is a failure.
// A stale write accepted, a fence regression or a refused holder is
// expected only where two masters grant at once (Sentinel or Cluster
// without WithReplicas, during a failover; see splitBrain); never anywhere
// else.
//
// A ZooKeeper ensemble restarted empty (FaultKillEmptyAll) is a limit of
// zklock only for a Session created after the loss, which the blank
// ensemble may grant before an old holder's Until. The harness's clients
// all hold Sessions from before it: the blank ensemble refuses those, and
// each gives its session up one session timeout after its connection
// dropped, past the Until of every lease it held (at most a third of the
// session timeout after its last confirmation). So nothing is expected.
//
// A Lock call that failed instead of waiting (LockFailed) and a register
// history that is not linearizable, or not known to be, are never
// expected: every fault the harness injects heals, and the register is
// the harness's own.
func Expect(backend, fault string, k Kind) string {
	s := serviceOf(backend)
	switch {
	case k == LockFailed || k == NotLinearizable || k == LinearizabilityUnknown:
		return ""
	case splitBrain(backend, fault) && (k == FenceRegression || k == HolderRefused || k == StaleWrite):
		return limitSplitBrain
	case k == StaleWrite || k == FenceRegression || k == HolderRefused:
		return ""
	}
	if fault == FaultClientPause && (k == SectionOverlap || k == LostUpdate) {
		return limitClientPause
	}
	if s == nil || s.expect == nil {
		return ""
	}
	return s.expect(backend, fault, k)
}

// splitBrain reports whether fault on backend can leave two masters
// granting the lock at once, each drawing fences from its own counter.
// Sentinel without WithReplicas: under every failover fault. Cluster
// without WithReplicas: only when the old master is paused and resumed,
// as it then serves the commands that waited for it before it hears that
// its replica took over. Not when it is cut off from the other nodes (it
// refuses writes once it has missed the majority of masters for the node
// timeout, before its replica can be elected), nor when it is killed and
// restarted (a master that starts refuses writes for two seconds, until
// it has heard the Cluster's configuration).
func splitBrain(backend, fault string) bool {
	s := serviceOf(backend)
	return s != nil && s.splitBrain != nil && s.splitBrain(backend, fault)
}

// recordedFaults returns the faults a history of backend may record:
// FaultsFor, and on Redlock FaultExpireBare after FaultExpire.
func recordedFaults(backend string) []string {
	fs := FaultsFor(backend)
	s := serviceOf(backend)
	if s == nil {
		return fs
	}
	for i := 0; i < len(fs); i++ {
		if as, ok := s.recordsAs[fs[i]]; ok {
			fs = slices.Insert(fs, i+1, as)
			i++
		}
	}
	return fs
}

// Allowed returns the kinds of violation fault may cause on backend.
func Allowed(backend, fault string) []Kind {
	var ks []Kind
	for _, k := range Kinds {
		if Expect(backend, fault, k) != "" {
			ks = append(ks, k)
		}
	}
	return ks
}

// validBackend reports whether b is one of Backends.
func validBackend(b string) bool { return slices.Contains(Backends, b) }
