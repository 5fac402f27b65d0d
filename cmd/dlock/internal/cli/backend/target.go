package backend

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/internal/zkpath"
	"github.com/dlock-go/dlock/mysqllock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/zklock"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// ZKRoot is where a lock name that is not an absolute path lives in
// ZooKeeper: the name "nightly" is the path /dlock/nightly.
const ZKRoot = "/dlock"

// A Target is a connected lock service.
type Target struct {
	spec    Spec
	single  *redislock.Client   // one Redis
	nodes   []*redislock.Client // Redlock: one client per master, for inspect and release
	quorum  *redlock.Client     // Redlock
	zk      *zklock.Client      // ZooKeeper
	pg      *pglock.Client      // PostgreSQL
	my      *mysqllock.Client   // MySQL or MariaDB
	etcd    *etcdlock.Client    // etcd
	pool    *pgxpool.Pool       // PostgreSQL, for the records of --once-per
	rdbs    []*redis.Client     // the Redis connections, for notes of forced releases
	pgTLS   string              // PostgreSQL: what TLS the connection negotiated
	closers []func()

	warnings []string // what the command must tell the user, learnt connecting
}

// Lock kinds of "dlock run --kind".
const (
	KindMutex     = "mutex"
	KindFair      = "fair"
	KindRead      = "read"
	KindWrite     = "write"
	KindSemaphore = "semaphore"
)

// Kinds lists the lock kinds in the order help shows them.
var Kinds = []string{KindMutex, KindFair, KindRead, KindWrite, KindSemaphore}

// Connect connects to the service spec describes and checks that it
// answers: the Redis instance, a majority of Redlock masters, or a
// ZooKeeper session. obs, if not nil, observes every lock made from it.
func Connect(ctx context.Context, spec Spec, obs dlock.Observer) (*Target, error) {
	QuietRedisLogs()
	t := &Target{spec: spec}
	switch spec.Kind() {
	case "mysql":
		if err := t.connectMySQL(ctx, obs); err != nil {
			t.Close()
			return nil, err
		}
		return t, nil
	case "etcd":
		if err := dialAny(ctx, "etcd", spec.Etcd); err != nil { // the client retries a refusal until its timeout
			return nil, err
		}
		if err := handshakeAny(ctx, "etcd", spec.Etcd, spec.EtcdTLS); err != nil { // and a failed handshake too
			return nil, err
		}
		if err := t.connectEtcd(ctx, obs); err != nil {
			t.Close()
			return nil, err
		}
		return t, nil
	case "postgres":
		if err := t.connectPostgres(ctx, obs); err != nil {
			t.Close()
			return nil, err
		}
		return t, nil
	case "zookeeper":
		if err := dialAny(ctx, "ZooKeeper", spec.ZK); err != nil {
			return nil, err
		}
		opts := []zklock.ClientOption{zklock.WithObserver(obs), zklock.WithLogger(spec.log())}
		if spec.LongestTTL > 0 {
			// --ttl is how long the lock outlives a dlock that died (kill
			// -9, a lost machine), as on every backend: on ZooKeeper, the
			// session timeout, plus up to a tick of the ensemble, which
			// looks for expired sessions once a tick. The ensemble grants a
			// timeout between its minSessionTimeout and maxSessionTimeout
			// (2 and 20 ticks by default: 4s and 40s at the default
			// tickTime of 2s). A lease lasts a third of it (LeaseTime).
			opts = append(opts, zklock.WithSessionTimeout(spec.LongestTTL))
		}
		if spec.ZKTLS != nil {
			opts = append(opts, zklock.WithTLS(spec.ZKTLS))
		}
		if spec.ZKUser != "" {
			opts = append(opts, zklock.WithDigestAuth(spec.ZKUser, spec.ZKPassword))
		}
		s, err := connectZK(ctx, spec.ZK, opts...)
		if err != nil {
			return nil, err
		}
		t.zk = s
		t.closers = append(t.closers, func() { s.Close() })
		if g := s.GrantedTimeout(); spec.LongestTTL > 0 && g > spec.LongestTTL {
			// Below minSessionTimeout: the ensemble keeps a dead
			// dlock's session, and its lock, for longer than --ttl.
			t.warnings = append(t.warnings, fmt.Sprintf("WARNING: --ttl %v is below the ZooKeeper ensemble's minSessionTimeout: it granted a session timeout of %v, so a dlock that dies holds the lock for up to %v; use --ttl %v or more, or lower the ensemble's minSessionTimeout",
				spec.LongestTTL, g, g, g))
		}
		return t, nil
	}
	conns := make([]redislock.Conn, len(spec.Redis))
	for i, o := range spec.Redis {
		redisOptions(o)
		rdb := redis.NewClient(o)
		t.rdbs = append(t.rdbs, rdb)
		t.closers = append(t.closers, func() { rdb.Close() })
		conns[i] = goredisconn.New(rdb)
		if len(spec.Redis) > 1 {
			c := redislock.New(conns[i])
			t.closers = append(t.closers, func() { c.Close() })
			t.nodes = append(t.nodes, c)
		}
	}
	errs := pingAll(ctx, t.rdbs, len(t.rdbs)/2+1, NodeTimeout(spec.LongestTTL))
	if err := refusedCredentials(errs); err != nil {
		t.Close()
		return nil, err
	}
	if len(spec.Redis) == 1 {
		if len(errs) > 0 {
			t.Close()
			return nil, errs[0]
		}
		t.single = redislock.New(conns[0], redislock.WithObserver(obs))
		t.closers = append([]func(){func() { t.single.Close() }}, t.closers...)
		return t, nil
	}
	if len(errs) > len(spec.Redis)/2 {
		t.Close()
		return nil, fmt.Errorf("only %d of %d Redis masters answer; Redlock needs a majority: %w",
			len(spec.Redis)-len(errs), len(spec.Redis), joinErrs(errs))
	}
	// A node sits out the window after a restart: at least as long as
	// the longest lease it may have granted.
	window := spec.RestartWindow
	if window == 0 {
		window = redlock.DefaultRestartWindow
	}
	opts := []redlock.ClientOption{redlock.WithObserver(obs), redlock.WithRestartWindow(max(window, spec.LongestTTL)),
		redlock.WithNodeTimeout(NodeTimeout(spec.LongestTTL))}
	t.quorum = redlock.New(conns, opts...)
	t.closers = append([]func(){func() { t.quorum.Close() }}, t.closers...)
	return t, nil
}

// NodeTimeout is how long the command's Redlock client waits for one
// master in one operation: a twentieth of the TTL, from redlock's default
// (50ms) up to 1s. A command is not latency-bound, and on a loaded host a
// process stalls for longer than 50ms, which cost the votes of the nodes
// that answered in the stall.
func NodeTimeout(ttl time.Duration) time.Duration {
	if ttl == 0 { // inspect, release: no lease to keep valid
		return time.Second
	}
	return min(max(ttl/20, redlock.DefaultNodeTimeout), time.Second)
}

// refusedCredentials returns a UsageError if one of errs, the failures to
// reach Redis servers, is a server refusing dlock's password: a mistake in
// the URL or the environment, which no retry fixes.
func refusedCredentials(errs []error) error {
	for _, err := range errs {
		msg := strings.TrimSuffix(err.Error(), ".")
		switch {
		case strings.Contains(msg, "NOAUTH"):
			return cmdutil.Usagef("%s: the server wants a password; give it in --password-file, in %s or in the URL (redis://:PASSWORD@host:port)", msg, EnvRedisPassword)
		case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "invalid password"):
			return cmdutil.Usagef("%s: the server refused the password; check --password-file's, %s or the URL's", msg, EnvRedisPassword)
		case strings.Contains(msg, "DB index is out of range"):
			return cmdutil.Usagef("%s: the URL's database number (redis://host:port/DB) is past the server's last database (its 'databases' setting, 16 by default)", msg)
		}
	}
	return nil
}

// connectZK is zklock.New, returning by ctx's deadline (or AnswerTimeout)
// even if zklock.New does not: with a server that accepts connections but
// never answers, it returns only when the server closes them. A session
// made after that is closed.
//
// zklock.New, ended by its context, reports why (a TLS error, a refused
// connection) once go-zookeeper's connection loop has stopped: at once on
// a quiet machine, but a loaded one took more than 200ms (a wrong CA was
// then reported as a bare deadline). That wait comes out of the time
// given, not on top of it: zklock.New gets all but a quarter of it, or a
// second at most, so that --wait 1s on a silent server fails in about 1s.
func connectZK(ctx context.Context, servers []string, opts ...zklock.ClientOption) (*zklock.Client, error) {
	type result struct {
		s   *zklock.Client
		err error
	}
	ctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	nctx, ncancel := context.WithDeadline(ctx, deadline.Add(-min(time.Until(deadline)/4, time.Second)))
	defer ncancel()
	done := make(chan result, 1)
	go func() {
		s, err := zklock.New(nctx, servers, opts...)
		done <- result{s, err}
	}()
	select {
	case r := <-done:
		return r.s, r.err
	case <-nctx.Done():
		select {
		case r := <-done:
			return r.s, r.err
		case <-ctx.Done():
		}
		go func() {
			if r := <-done; r.s != nil {
				r.s.Close()
			}
		}()
		return nil, fmt.Errorf("no session with ZooKeeper %s: %w", strings.Join(servers, ","), ctx.Err())
	}
}

// AnswerTimeout bounds a TCP connection to a ZooKeeper server, and then
// the making of a session, as go-redis's defaults bound a connection to
// Redis and its first answer (about 5s).
const AnswerTimeout = 5 * time.Second

// dialAny returns nil once one of servers accepts a TCP connection, or an
// error naming every server's failure. The ZooKeeper client retries
// unreachable servers until its context ends; this makes a service that
// is down fail as fast as Redis does.
func dialAny(ctx context.Context, service string, servers []string) error {
	failed := anyAnswers(ctx, servers, func(ctx context.Context, srv string) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", srv)
		if err == nil {
			c.Close()
		}
		return err
	})
	if failed == nil {
		return nil
	}
	return fmt.Errorf("no %s server accepts connections: %w", service, joinErrs(failed))
}

// anyAnswers runs try on every server at once, within AnswerTimeout, and
// returns nil as soon as one succeeds, or else every server's error (an
// empty, non-nil slice for no servers).
func anyAnswers(ctx context.Context, servers []string, try func(ctx context.Context, srv string) error) []error {
	ctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
	defer cancel()
	errs := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { errs <- try(ctx, srv) }()
	}
	failed := make([]error, 0, len(servers)) // not nil: no server is a failure
	for range servers {
		err := <-errs
		if err == nil {
			return nil
		}
		failed = append(failed, err)
	}
	return failed
}

// ClientName is how this process names itself to the lock service (Redis
// CLIENT SETNAME, notes of forced releases): dlock/<host>/<pid>, with any
// character Redis does not allow in a name replaced by '-'.
func ClientName() string {
	host, _ := os.Hostname()
	clean := strings.Map(func(r rune) rune {
		if r <= ' ' || r > '~' {
			return '-'
		}
		return r
	}, host)
	return fmt.Sprintf("dlock/%s/%d", clean, os.Getpid())
}

// QuietRedisLogs stops go-redis from logging to stderr on its own (a
// pool's failed dials to a node that is down): the errors reach the user
// through dlock's own messages.
func QuietRedisLogs() { redis.SetLogger(quiet{}) }

// quiet drops go-redis's log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Kind names the backend: "redis", "redlock", "zookeeper", "postgres",
// "mysql" or "etcd".
func (t *Target) Kind() string { return t.spec.Kind() }

// Describe says what the target is, for messages: "redis 127.0.0.1:6379"
// (see Spec.Describe), and on PostgreSQL the TLS the connection
// negotiated.
func (t *Target) Describe() string {
	if t.spec.Postgres != nil {
		return t.spec.Describe() + " (" + t.pgTLS + ")"
	}
	return t.spec.Describe()
}

// Warnings returns what the command must tell the user about the
// connection before it goes on, one line each: a ZooKeeper session
// timeout longer than --ttl.
func (t *Target) Warnings() []string { return t.warnings }

// Close releases every lease still held and closes the connections.
func (t *Target) Close() {
	for _, c := range t.closers {
		c()
	}
	t.closers = nil
}

// LeaseTime returns the lease time in force for a lock asked to last ttl:
// ttl, except on ZooKeeper, where a lease lasts at most a third of the
// session timeout (see zklock.WithTTL).
func (t *Target) LeaseTime(ttl time.Duration) time.Duration {
	if t.zk != nil {
		return min(ttl, t.zk.Timeout()/3)
	}
	return ttl
}

// LockOptions are what "dlock run" can ask of a lock.
type LockOptions struct {
	Kind    string
	Permits int           // for KindSemaphore
	TTL     time.Duration // lease time; renewed while held
	MaxHold time.Duration // the longest hold (WithMaxHold); 0: no cap
}

// CheckName returns a UsageError if name cannot name a lock on this kind
// of backend ("redis", "redlock" or "zookeeper"): every limit the
// libraries and servers put on a name is checked here, so that a bad name
// is a usage error (exit 64), never a failure of the service.
func CheckName(kind, name string) error {
	q := cmdutil.Quote(name)
	switch {
	case name == "":
		return cmdutil.Usagef("empty lock name; give a name such as nightly-report")
	case !utf8.ValidString(name):
		return cmdutil.Usagef("lock name %s is not valid UTF-8", q)
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return cmdutil.Usagef("lock name %s has a control character", q)
	case kind == "zookeeper":
		return checkZKName(name)
	case kind == "postgres":
		return checkPGName(name)
	case kind == "mysql":
		return checkMySQLName(name)
	case kind == "etcd":
		return checkEtcdName(name)
	case strings.ContainsAny(name, "{}"):
		return cmdutil.Usagef("lock name %s contains a brace; Redis lock names may not, since dlock wraps them in a {hash tag}", q)
	case len(name) > rediskeys.MaxName:
		return cmdutil.Usagef("lock name %s is too long: Redis lock names are at most %d bytes", q, rediskeys.MaxName)
	}
	return nil
}

// CheckKind returns a UsageError if the lock kind is not available on the
// backend spec describes, before anything is contacted.
func CheckKind(spec Spec, kind string) error {
	switch {
	case kind == KindMutex:
	case spec.Kind() == "redlock":
		return cmdutil.Usagef("--kind %s is not available with Redlock (%d Redis URLs); Redlock has only --kind mutex", kind, len(spec.Redis))
	case spec.Kind() == "postgres":
		return cmdutil.Usagef("--kind %s is not available with PostgreSQL; it has only --kind mutex (with --session for session mode)", kind)
	case spec.Kind() == "mysql":
		return cmdutil.Usagef("--kind %s is not available with MySQL; it has only --kind mutex (with --session for session mode)", kind)
	}
	return nil
}

// checkZKName checks what ZooKeeper and zklock refuse in the path of a
// lock name.
func checkZKName(name string) error {
	p := ZKPath(name)
	if name == "/" {
		return cmdutil.Usagef("the root / cannot be a lock; give a name such as nightly-report or a path such as /locks/nightly")
	}
	if reason := zkpath.Check(p); reason != "" {
		if p != name && strings.HasPrefix(reason, "is ") {
			reason = strings.Replace(reason, "is ", "would be a ZooKeeper path that is ", 1)
		}
		return cmdutil.Usagef("lock name %s %s", cmdutil.Quote(name), reason)
	}
	return nil
}

// ZKPath is the ZooKeeper path of the lock called name.
func ZKPath(name string) string {
	if strings.HasPrefix(name, "/") {
		return name
	}
	return ZKRoot + "/" + name
}

// Locker returns the lock called name of the kind o asks for.
func (t *Target) Locker(name string, o LockOptions) (dlock.Locker, error) {
	switch {
	case t.single != nil:
		opts := []redislock.Option{redislock.WithTTL(o.TTL), redislock.WithMaxHold(o.MaxHold)}
		switch o.Kind {
		case KindMutex:
			return t.single.NewMutex(name, opts...), nil
		case KindFair:
			return t.single.NewFairMutex(name, opts...), nil
		case KindRead:
			return t.single.NewRWMutex(name, opts...).Reader(), nil
		case KindWrite:
			return t.single.NewRWMutex(name, opts...).Writer(), nil
		case KindSemaphore:
			return t.single.NewSemaphore(name, o.Permits, opts...), nil
		}
	case t.quorum != nil:
		if o.Kind != KindMutex {
			return nil, cmdutil.Usagef("--kind %s is not available with Redlock (%d Redis URLs); Redlock has only --kind mutex", o.Kind, len(t.spec.Redis))
		}
		return t.quorum.NewMutex(name, redlock.WithTTL(o.TTL), redlock.WithMaxHold(o.MaxHold)), nil
	case t.pg != nil:
		if o.Kind != KindMutex {
			return nil, cmdutil.Usagef("--kind %s is not available with PostgreSQL; it has only --kind mutex (with --session for session mode)", o.Kind)
		}
		opts := []pglock.Option{pglock.WithTTL(o.TTL), pglock.WithMaxHold(o.MaxHold)}
		if t.spec.Session {
			return t.pg.NewSessionMutex(name, opts...), nil
		}
		return t.pg.NewMutex(name, opts...), nil
	case t.my != nil:
		if o.Kind != KindMutex {
			return nil, cmdutil.Usagef("--kind %s is not available with MySQL; it has only --kind mutex (with --session for session mode)", o.Kind)
		}
		opts := []mysqllock.Option{mysqllock.WithTTL(o.TTL), mysqllock.WithMaxHold(o.MaxHold)}
		if t.spec.Session {
			return t.my.NewSessionMutex(name, opts...), nil
		}
		return t.my.NewMutex(name, opts...), nil
	case t.etcd != nil:
		if l, ok := t.etcdLocker(name, o); ok {
			return l, nil
		}
	case t.zk != nil:
		p, opts := ZKPath(name), []zklock.Option{zklock.WithTTL(o.TTL), zklock.WithMaxHold(o.MaxHold)}
		switch o.Kind {
		case KindMutex, KindFair: // a ZooKeeper mutex is a FIFO queue: always fair
			return t.zk.NewMutex(p, opts...), nil
		case KindRead:
			return t.zk.NewRWMutex(p, opts...).Reader(), nil
		case KindWrite:
			return t.zk.NewRWMutex(p, opts...).Writer(), nil
		case KindSemaphore:
			return t.zk.NewSemaphore(p, o.Permits, opts...), nil
		}
	}
	return nil, cmdutil.Usagef("--kind %q is not one of %s", o.Kind, strings.Join(Kinds, ", "))
}

// joinErrs is errors.Join with the errors on one line, "; " between them:
// the command prints one line per failure.
func joinErrs(errs []error) error { return errList(errs) }

type errList []error

func (l errList) Error() string {
	s := make([]string, len(l))
	for i, err := range l {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (l errList) Unwrap() []error { return l }
