package backend

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	osuser "os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/rediskeys"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// Environment variables of Redis and Redlock, read when the matching flag
// is not given.
const (
	EnvRedis         = "DLOCK_REDIS"          // Redis URLs, separated by commas or spaces
	EnvRedisPassword = "DLOCK_REDIS_PASSWORD" // the password of Redis URLs that carry none, and of --redis-cluster and --redis-sentinel
	EnvRedisCluster  = "DLOCK_REDIS_CLUSTER"  // Redis Cluster nodes, host:port[,host:port...]
	EnvRedisSentinel = "DLOCK_REDIS_SENTINEL" // Redis Sentinels, host:port[,host:port...]
	EnvRedisMaster   = "DLOCK_REDIS_MASTER"   // the name of the master the Sentinels monitor
	// EnvRedisSentinelPassword is the Sentinels' own password (their
	// requirepass), when they have one; the master's is EnvRedisPassword's.
	EnvRedisSentinelPassword = "DLOCK_REDIS_SENTINEL_PASSWORD"
)

// Redis: one --redis URL, a Redis Cluster (--redis-cluster) or a master
// that Sentinels monitor (--redis-sentinel, --redis-master), redislock.
// Redlock (redlock.go) is the same servers' family: both keep the records
// of --once-per and the notes of forced releases on every server
// (redisServers).
var _ = register(&driver{
	name: "redis", title: "Redis", order: 1,
	flag: "redis", example: "--redis redis://host:port",
	env:         []string{EnvRedis, EnvRedisPassword, EnvRedisCluster, EnvRedisSentinel, EnvRedisMaster, EnvRedisSentinelPassword},
	passwordEnv: []string{EnvRedisPassword, EnvRedisSentinelPassword},
	flags: func(fs *flag.FlagSet, f *Flags) {
		fs.Var(&f.Redis, "redis", "Redis URL, redis://[user:password@]host:port[/db] or rediss:// for TLS; give it 3 or more times for Redlock (env "+EnvRedis+")")
		fs.StringVar(&f.RedisCluster, "redis-cluster", "", "Redis Cluster: some of its nodes, host:port[,host:port...]; the password is --password-file's or "+EnvRedisPassword+"'s, TLS the TLS flags' (env "+EnvRedisCluster+")")
		fs.StringVar(&f.RedisSentinel, "redis-sentinel", "", "Redis Sentinel: the Sentinels, host:port[,host:port...] (usually port 26379), with --redis-master; the master's password is --password-file's or "+EnvRedisPassword+"'s, the Sentinels' own, if they have one, "+EnvRedisSentinelPassword+"'s (env "+EnvRedisSentinel+")")
		fs.StringVar(&f.RedisMaster, "redis-master", "", "with --redis-sentinel: the name of the master the Sentinels monitor, as in sentinel.conf (env "+EnvRedisMaster+")")
	},
	given: func(f *Flags) bool { return len(f.Redis) > 0 || f.RedisCluster != "" || f.RedisSentinel != "" },
	fromEnv: func(f *Flags, getenv func(string) string) {
		if v := getenv(EnvRedis); v != "" {
			f.Redis = SplitURLs(v)
		}
		f.RedisCluster, f.RedisSentinel = getenv(EnvRedisCluster), getenv(EnvRedisSentinel)
	},
	checkFlags: func(f *Flags, _ func(string) string, named bool) error {
		if f.RedisMaster != "" && f.RedisSentinel == "" {
			return cmdutil.Usagef("--redis-master goes with --redis-sentinel (the Sentinels that monitor it)")
		}
		return nil
	},
	check: func(f *Flags) error {
		given := 0
		for _, g := range []bool{len(f.Redis) > 0, f.RedisCluster != "", f.RedisSentinel != ""} {
			if g {
				given++
			}
		}
		if given > 1 {
			return cmdutil.Usagef("--redis, --redis-cluster and --redis-sentinel (or %s, %s and %s) name different deployments; give one", EnvRedis, EnvRedisCluster, EnvRedisSentinel)
		}
		if len(f.Redis) == 2 {
			return cmdutil.Usagef("two Redis URLs: give one for a single Redis, or three or more independent masters for Redlock (a majority of two is both)")
		}
		return nil
	},
	resolve:   resolveRedis,
	claims:    func(s Spec) bool { return len(s.Redis) == 1 || s.RedisCluster != nil || s.RedisSentinel != nil },
	describe:  describeRedis,
	checkName: checkRedisName,
	nodes:     redisNodes,
	connect:   connectRedis,
	oncePer:   true,
	fenceNote: "latest granted to a name of this slot; the holder's is at most that",
})

// resolveRedis checks the Redis URLs of f, for a single Redis or Redlock,
// or the nodes of a Redis Cluster, or the Sentinels of a master.
func resolveRedis(f *Flags, getenv func(string) string, filed string, spec *Spec) error {
	seen := map[string]bool{}
	password := getenv(EnvRedisPassword)
	if filed != "" {
		password = filed
	}
	if f.RedisCluster != "" || f.RedisSentinel != "" {
		return resolveRedisHA(f, getenv, password, spec)
	}
	for _, u := range f.Redis {
		o, err := parseRedis(u)
		if err != nil {
			return err
		}
		switch {
		case o.Password != "" && filed != "":
			return cmdutil.Usagef("--password-file and a password in the --redis URL %q: give one", cmdutil.RedactInput(u))
		case o.Password == "":
			o.Password = password
		}
		if err := f.TLS.applyTLS(o, cmdutil.RedactInput(u), &spec.Warnings); err != nil {
			return err
		}
		if seen[o.Addr] {
			return cmdutil.Usagef("--redis %s is given twice; Redlock needs independent masters", o.Addr)
		}
		seen[o.Addr] = true
		spec.Redis = append(spec.Redis, o)
	}
	return nil
}

// resolveRedisHA fills in spec for a Redis Cluster or a master that
// Sentinels monitor, with password, and TLS if the TLS flags are given.
func resolveRedisHA(f *Flags, getenv func(string) string, password string, spec *Spec) error {
	var tlsConfig *tls.Config
	if f.TLS.given() {
		var err error
		if tlsConfig, err = f.TLS.config(nil); err != nil {
			return err
		}
	}
	if f.RedisCluster != "" {
		addrs, err := parseAddrs("--redis-cluster", f.RedisCluster, "a Redis Cluster node's port, often 6379 or 7000")
		if err != nil {
			return err
		}
		spec.RedisCluster = &redis.ClusterOptions{Addrs: addrs, Password: password, TLSConfig: tlsConfig}
		return nil
	}
	addrs, err := parseAddrs("--redis-sentinel", f.RedisSentinel, "a Sentinel's port is usually 26379")
	if err != nil {
		return err
	}
	master := cmp.Or(f.RedisMaster, getenv(EnvRedisMaster))
	if master == "" {
		return cmdutil.Usagef("--redis-sentinel needs --redis-master NAME (or %s), the name of the master the Sentinels monitor, as in sentinel.conf's 'sentinel monitor NAME ...'", EnvRedisMaster)
	}
	sentinelPassword := getenv(EnvRedisSentinelPassword)
	cmdutil.NoteSecret(sentinelPassword)
	spec.RedisSentinel = &redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, Password: password,
		SentinelPassword: sentinelPassword, TLSConfig: tlsConfig}
	return nil
}

// parseAddrs checks a comma-separated list of host:port for flag; hint
// says which port is usual.
func parseAddrs(flag, list, hint string) ([]string, error) {
	var addrs []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, cmdutil.Usagef("%s %q has an empty address; want host:port[,host:port...]", flag, cmdutil.RedactInput(list))
		}
		if strings.Contains(s, "://") || strings.Contains(s, "@") {
			return nil, cmdutil.Usagef("%s address %q: give host:port, without a scheme or credentials (the password goes in --password-file or %s, TLS in the TLS flags)", flag, cmdutil.RedactInput(s), EnvRedisPassword)
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" {
			return nil, cmdutil.Usagef("%s address %q is not host:port (%s)", flag, cmdutil.RedactInput(s), hint)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, cmdutil.Usagef("%s address %q: port %q is not a number from 1 to 65535", flag, cmdutil.RedactInput(s), cmdutil.RedactInput(port))
		}
		if slices.Contains(addrs, s) {
			return nil, cmdutil.Usagef("%s address %s is given twice", flag, s)
		}
		addrs = append(addrs, s)
	}
	return addrs, nil
}

// describeRedis names the servers of spec: "a:6379,b:6379,c:6379",
// "cluster a:7000,b:7000", "sentinel a:26379,b:26379 master mymaster".
func describeRedis(s Spec) string {
	switch {
	case s.RedisCluster != nil:
		return "cluster " + strings.Join(s.RedisCluster.Addrs, ",")
	case s.RedisSentinel != nil:
		return "sentinel " + strings.Join(s.RedisSentinel.SentinelAddrs, ",") + " master " + s.RedisSentinel.MasterName
	}
	addrs := make([]string, len(s.Redis))
	for i, o := range s.Redis {
		addrs[i] = o.Addr
	}
	return strings.Join(addrs, ",")
}

// checkRedisName checks what redislock and redlock refuse in a lock name.
func checkRedisName(name string) error {
	q := cmdutil.Quote(name)
	switch {
	case strings.ContainsAny(name, "{}"):
		return cmdutil.Usagef("lock name %s contains a brace; Redis lock names may not, since dlock wraps them in a {hash tag}", q)
	case len(name) > rediskeys.MaxName:
		return cmdutil.Usagef("lock name %s is too long: Redis lock names are at most %d bytes", q, rediskeys.MaxName)
	}
	return nil
}

// redisNodes returns each server of spec as a Redis service of its own;
// a Redis Cluster or a Sentinel's master is one service.
func redisNodes(s Spec) []Node {
	if s.RedisCluster != nil || s.RedisSentinel != nil {
		return []Node{{Addr: describeRedis(s), Spec: s}}
	}
	var out []Node
	for _, o := range s.Redis {
		c := *o
		out = append(out, Node{Addr: o.Addr, Spec: Spec{Redis: []*redis.Options{&c}}})
	}
	return out
}

// redisServers are the Redis servers of a Redis or Redlock target, in the
// order of the URLs.
type redisServers struct {
	addrs []string
	rdbs  []redis.UniversalClient
}

func (s redisServers) closeAll() {
	for _, rdb := range s.rdbs {
		rdb.Close()
	}
}

// dialRedis makes a client of each of spec's Redis URLs, and pings them
// all at once (pingAll). It returns the servers, a redislock.Conn of each,
// and the failures of those that did not answer; or a UsageError, with
// nothing left open, if a server refused dlock's credentials.
func dialRedis(ctx context.Context, spec Spec) (redisServers, []redislock.Conn, []error, error) {
	QuietRedisLogs()
	var s redisServers
	var conns []redislock.Conn
	add := func(addr string, rdb redis.UniversalClient) {
		s.addrs, s.rdbs = append(s.addrs, addr), append(s.rdbs, rdb)
		conns = append(conns, goredisconn.New(rdb))
	}
	switch {
	case spec.RedisCluster != nil:
		o := *spec.RedisCluster
		o.DisableIdentity, o.ContextTimeoutEnabled, o.ClientName, o.DialerRetries = true, true, ClientName(), 1
		if o.DialTimeout <= 0 {
			o.DialTimeout = defaultDialTimeout
		}
		o.Dialer = redisDialer(o.DialTimeout, o.TLSConfig)
		add("cluster "+strings.Join(o.Addrs, ","), redis.NewClusterClient(&o))
	case spec.RedisSentinel != nil:
		o := *spec.RedisSentinel
		o.DisableIdentity, o.ContextTimeoutEnabled, o.ClientName, o.DialerRetries = true, true, ClientName(), 1
		if o.DialTimeout <= 0 {
			o.DialTimeout = defaultDialTimeout
		}
		o.Dialer = redisDialer(o.DialTimeout, o.TLSConfig)
		add("master "+o.MasterName, redis.NewFailoverClient(&o))
	}
	for _, o := range spec.Redis {
		redisOptions(o)
		add(o.Addr, redis.NewClient(o))
	}
	errs := pingAll(ctx, s.rdbs, s.addrs, len(s.rdbs)/2+1, NodeTimeout(spec.LongestTTL))
	if err := refusedCredentials(errs); err != nil {
		s.closeAll()
		return redisServers{}, nil, nil, err
	}
	return s, conns, errs, nil
}

// redisConn is one Redis server.
type redisConn struct {
	redisServers
	c *redislock.Client
}

func connectRedis(ctx context.Context, spec Spec, obs dlock.Observer) (conn, error) {
	s, conns, errs, err := dialRedis(ctx, spec)
	if err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		s.closeAll()
		return nil, errs[0]
	}
	return &redisConn{s, redislock.New(conns[0], redislock.WithObserver(obs))}, nil
}

func (r *redisConn) locker(name string, o LockOptions) (dlock.Locker, error) {
	opts := []redislock.Option{redislock.WithTTL(o.TTL), redislock.WithMaxHold(o.MaxHold)}
	switch o.Kind {
	case KindMutex:
		return r.c.NewMutex(name, opts...), nil
	case KindFair:
		return r.c.NewFairMutex(name, opts...), nil
	case KindRead:
		return r.c.NewRWMutex(name, opts...).Reader(), nil
	case KindWrite:
		return r.c.NewRWMutex(name, opts...).Writer(), nil
	case KindSemaphore:
		return r.c.NewSemaphore(name, o.Permits, opts...), nil
	}
	return nil, unknownKind(o.Kind)
}

func (r *redisConn) election(name string, ttl time.Duration) (dlock.Election, error) {
	return r.c.NewElection(name, redislock.WithTTL(ttl)), nil
}

func (r *redisConn) admin(name string) (dlock.Admin, string, string) { return r.c, name, "" }

func (r *redisConn) close() {
	r.c.Close()
	r.closeAll()
}

// defaultDialTimeout is go-redis's dial timeout, when the URL gives none
// (dial_timeout=...).
const defaultDialTimeout = 5 * time.Second

// redisOptions sets the options of the command's go-redis clients: each
// call bounded by its context (the library bounds its own, see
// redislock.AttemptTimeout and redlock.WithNodeTimeout); one dial per
// attempt, since the locks retry as they wait; and a dialer whose TLS
// handshake is bounded by the dial timeout and, when it fails, says so.
func redisOptions(o *redis.Options) {
	o.DisableIdentity = true // no CLIENT SETINFO: older servers and proxies refuse it
	o.ContextTimeoutEnabled = true
	o.ClientName = ClientName() // CLIENT LIST shows who is connected
	o.DialerRetries = 1
	if o.DialTimeout <= 0 {
		o.DialTimeout = defaultDialTimeout
	}
	if o.Dialer == nil {
		o.Dialer = redisDialer(o.DialTimeout, o.TLSConfig)
	}
}

// redisDialer returns a go-redis Dialer that connects within timeout,
// and, with cfg, completes the TLS handshake within timeout too. go-redis's
// own leaves the handshake to the first command, where a server that does
// not speak TLS (rediss:// to a plain port) shows as nothing but
// "context deadline exceeded", or to tls.DialWithDialer, which ignores the
// context.
func redisDialer(timeout time.Duration, cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		d := net.Dialer{KeepAlive: 30 * time.Second}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil || cfg == nil {
			return conn, err
		}
		c := cfg.Clone()
		if c.ServerName == "" {
			c.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, fmt.Errorf("TLS handshake with %s did not complete within %v: does the server speak TLS on that port? (rediss:// is Redis over TLS, redis:// plain TCP): %w", addr, timeout, err)
			}
			return nil, fmt.Errorf("TLS handshake with %s failed: %w", addr, err)
		}
		return tc, nil
	}
}

// pingAll pings every server at once, each for at most AnswerTimeout, and
// returns the failures in rdbs' order. With quorum below len(rdbs)
// (Redlock), it stops waiting once quorum servers have answered and grace
// has passed since: a master that is down must not hold up the command
// beyond its node timeout. A server that has not answered by then is
// reported as such.
func pingAll(ctx context.Context, rdbs []redis.UniversalClient, addrs []string, quorum int, grace time.Duration) []error {
	ctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
	defer cancel()
	type pong struct {
		i   int
		err error
	}
	pongs := make(chan pong, len(rdbs))
	for i, rdb := range rdbs {
		go func() { pongs <- pong{i, rdb.Ping(ctx).Err()} }()
	}
	found := make([]error, len(rdbs))
	answered := make([]bool, len(rdbs))
	var timer <-chan time.Time
	ok := 0
wait:
	for range rdbs {
		select {
		case p := <-pongs:
			answered[p.i], found[p.i] = true, p.err
			if p.err == nil {
				if ok++; ok == quorum && quorum < len(rdbs) {
					timer = time.After(grace)
				}
			}
		case <-timer:
			break wait
		}
	}
	var errs []error
	for i := range rdbs {
		switch {
		case !answered[i]:
			errs = append(errs, fmt.Errorf("redis %s: no answer within %v", addrs[i], grace))
		case found[i] != nil:
			errs = append(errs, fmt.Errorf("redis %s: %w", addrs[i], found[i]))
		}
	}
	return errs
}

// eachNode runs f for each of n Redis servers at once, each with ctx
// bounded by timeout, and returns when every f has: a server that does
// not answer costs the timeout once, not once per server.
func eachNode(ctx context.Context, n int, timeout time.Duration, f func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			f(ctx, i)
		})
	}
	wg.Wait()
}

// refusedCredentials returns a UsageError if one of errs, the failures to
// reach Redis servers, is a server refusing dlock's password: a mistake in
// the URL or the environment, which no retry fixes.
func refusedCredentials(errs []error) error {
	for _, err := range errs {
		msg := strings.TrimSuffix(err.Error(), ".")
		sentinels := strings.Contains(msg, "all sentinels") // go-redis's words for the Sentinels' own failures
		switch {
		case sentinels && strings.Contains(msg, "NOAUTH"):
			return cmdutil.Usagef("%s: the Sentinels want a password of their own; give it in %s", msg, EnvRedisSentinelPassword)
		case sentinels && (strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "invalid password")):
			return cmdutil.Usagef("%s: the Sentinels refused the password; check %s", msg, EnvRedisSentinelPassword)
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

// QuietRedisLogs stops go-redis from logging to stderr on its own (a
// pool's failed dials to a node that is down): the errors reach the user
// through dlock's own messages.
func QuietRedisLogs() { redis.SetLogger(quiet{}) }

// quiet drops go-redis's log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// The record of a lock's last successful run ("dlock run --once-per") is
// the key dlock:{name}:done on Redis (on every Redlock master), holding
// the server's time in milliseconds when the run finished, and expiring
// --once-per after it.

func doneKey(name string) string { return rediskeys.For(name).Base + ":done" }

// lastRun returns how long ago the last successful run of name finished,
// on the server's clock, if its record has not expired. With Redlock, the
// most recent record of any master counts, and a majority must answer.
func (s redisServers) lastRun(ctx context.Context, name string) (ago time.Duration, found bool, err error) {
	var errs []error
	answered := 0
	for i, rdb := range s.rdbs {
		a, ok, err := lastRunOn(ctx, rdb, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.addrs[i], err))
			continue
		}
		answered++
		if ok && (!found || a < ago) {
			ago, found = a, true
		}
	}
	if answered <= len(s.rdbs)/2 {
		return 0, false, fmt.Errorf("reading the record of the last run: %w", joinErrs(errs))
	}
	return ago, found, nil
}

func lastRunOn(ctx context.Context, rdb redis.UniversalClient, name string) (time.Duration, bool, error) {
	// The record and the time of the server that keeps it (of a Redis
	// Cluster, the master of its slot), in one script.
	v, err := lastRunScript.Run(ctx, rdb, []string{doneKey(name)}).Slice()
	if err != nil {
		return 0, false, err
	}
	if len(v) != 2 {
		return 0, false, fmt.Errorf("unexpected reply %v", v)
	}
	s, _ := v[0].(string)
	now, _ := v[1].(int64)
	if s == "" {
		return 0, false, nil
	}
	finished, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, nil // not dlock's: ignored, and overwritten by the next success
	}
	return time.Duration(now-finished) * time.Millisecond, true, nil
}

// lastRunScript returns the value of KEYS[1] ("" for none) and the
// server's time in milliseconds.
var lastRunScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
return {v or '', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
`)

// recordRun records that a run of name finished successfully now, for
// keep. With Redlock, a majority of masters must take the record.
func (s redisServers) recordRun(ctx context.Context, name string, keep time.Duration) error {
	var errs []error
	for i, rdb := range s.rdbs {
		// The server's own time, in one script, so that LastRun reads
		// an age on one clock.
		err := recordScript.Run(ctx, rdb, []string{doneKey(name)}, keep.Milliseconds()).Err()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.addrs[i], err))
		}
	}
	if len(errs) > 0 && len(s.rdbs)-len(errs) <= len(s.rdbs)/2 {
		return fmt.Errorf("recording the run: %w", joinErrs(errs))
	}
	return nil
}

// clearRun deletes the record on every server. With Redlock, a majority
// must answer.
func (s redisServers) clearRun(ctx context.Context, name string) (bool, error) {
	var errs []error
	found := false
	for i, rdb := range s.rdbs {
		n, err := rdb.Del(ctx, doneKey(name)).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.addrs[i], err))
		}
		found = found || n > 0
	}
	if len(errs) > 0 && len(s.rdbs)-len(errs) <= len(s.rdbs)/2 {
		return found, fmt.Errorf("removing the record of the last run: %w", joinErrs(errs))
	}
	return found, nil
}

// recordScript sets KEYS[1] to the server's time in milliseconds, expiring
// in ARGV[1] milliseconds.
var recordScript = redis.NewScript(`
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], tostring(ms), 'PX', ARGV[1])
return ms
`)

// forcedNoteLife is how long the note of a forced release stays.
const forcedNoteLife = 24 * time.Hour

// forcedKey is where the note of name's last forced release is kept.
func forcedKey(name string) string { return "dlock:{" + name + "}:forced" }

// noteForced leaves a note of a forced release on every Redis server that
// answers, for forcedNoteLife: who, when, and what was removed.
func (s redisServers) noteForced(ctx context.Context, name string, removed int) {
	user := os.Getenv("USER")
	if u, err := osuser.Current(); user == "" && err == nil {
		user = u.Username
	}
	if user == "" {
		user = "uid " + strconv.Itoa(os.Getuid())
	}
	note := fmt.Sprintf("%s by %s (user %s): removed %d", time.Now().UTC().Format(time.RFC3339), ClientName(), user, removed)
	eachNode(ctx, len(s.rdbs), NodeTimeout(0), func(ctx context.Context, i int) {
		s.rdbs[i].Set(ctx, forcedKey(name), note, forcedNoteLife) // a note that cannot be written is not worth failing for
	})
}

// forcedNote returns the note of name's last forced release, or "": the
// first found, in the order of the servers, among those that answer
// within NodeTimeout(0).
func (s redisServers) forcedNote(ctx context.Context, name string) string {
	notes := make([]string, len(s.rdbs))
	eachNode(ctx, len(s.rdbs), NodeTimeout(0), func(ctx context.Context, i int) {
		notes[i], _ = s.rdbs[i].GetRange(ctx, forcedKey(name), 0, 255).Result()
	})
	for _, v := range notes {
		if v != "" {
			return v
		}
	}
	return ""
}

// urlList is a repeatable flag.
type urlList []string

func (l *urlList) String() string { return strings.Join(*l, ",") }
func (l *urlList) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("empty URL; want redis://host:port")
	}
	*l = append(*l, s)
	return nil
}

// parseRedis checks one Redis URL.
func parseRedis(raw string) (*redis.Options, error) {
	shown := cmdutil.RedactInput(raw)
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" && u.Opaque != "" {
		return nil, cmdutil.Usagef("--redis %q is not a URL; want redis://[user:password@]host:port[/db] or rediss://... for TLS", shown)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, cmdutil.Usagef("--redis %q: scheme %q is not supported; use redis:// or rediss:// (TLS)", shown, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, cmdutil.Usagef("--redis %q has no host; want redis://host:port", shown)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, cmdutil.Usagef("--redis %q: the port is not a number from 1 to 65535 (a password with / # ? %% or @ must be percent-encoded)", shown)
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" && strings.Trim(db, "0123456789") != "" {
		return nil, cmdutil.Usagef("--redis %q: the path after host:port is not a database number from 0 up (redis://host:port/DB; a password with / # ? %% or @ must be percent-encoded)", shown)
	}
	o, err := redis.ParseURL(raw)
	if err != nil {
		return nil, cmdutil.Usagef("--redis %q: %v", shown, cmdutil.RedactIn(err.Error(), raw))
	}
	return o, nil
}

// SplitURLs splits the value of DLOCK_REDIS into URLs. They are separated
// by commas or white space, but a URL's password may contain either, so a
// new URL starts only where a separator is followed by redis:// or
// rediss://.
func SplitURLs(v string) []string {
	isSep := func(b byte) bool { return b == ',' || b == ' ' || b == '\t' || b == '\n' || b == '\r' }
	var urls []string
	start := 0
	for i := 0; i < len(v); i++ {
		if !isSep(v[i]) {
			continue
		}
		j := i
		for j < len(v) && isSep(v[j]) {
			j++
		}
		if j == len(v) || strings.HasPrefix(v[j:], "redis://") || strings.HasPrefix(v[j:], "rediss://") {
			if u := strings.TrimSpace(strings.Trim(v[start:i], ", \t\n\r")); u != "" {
				urls = append(urls, u)
			}
			start = j
		}
		i = j - 1
	}
	if u := strings.Trim(v[start:], ", \t\n\r"); u != "" {
		urls = append(urls, u)
	}
	return urls
}
