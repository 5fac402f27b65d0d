// Package backend turns the dlock command's backend flags (--redis, --zk,
// --postgres, --mysql, --etcd) and their environment variables into a
// connected lock service. Each backend registers one driver, in its own
// file (registry.go says what a driver is); the rest of the package and
// of the command goes through the drivers.
package backend

import (
	"crypto/tls"
	"flag"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/pglock"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// ConnectionEnv lists the environment variables that tell dlock how to
// reach the lock service, credentials included: dlock run removes them
// from COMMAND's environment.
func ConnectionEnv() []string {
	var env []string
	for _, d := range drivers {
		env = append(env, d.env...)
	}
	return append(env, EnvTLSCA, EnvTLSCert, EnvTLSKey, EnvTLSServerName)
}

// PasswordEnv lists the variables of ConnectionEnv that hold a password
// alone.
func PasswordEnv() []string {
	var env []string
	for _, d := range drivers {
		env = append(env, d.passwordEnv...)
	}
	return env
}

// IsConnectionEnv reports whether kv, a "NAME=value" environment entry,
// sets one of ConnectionEnv.
func IsConnectionEnv(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	return slices.Contains(ConnectionEnv(), name)
}

// Flags are the backend flags that run, inspect, release and bench share.
type Flags struct {
	Redis urlList
	// RedisCluster lists some nodes of a Redis Cluster; RedisSentinel the
	// Sentinels that monitor the master called RedisMaster.
	RedisCluster, RedisSentinel, RedisMaster string
	ZK                                       string
	Postgres                                 string
	MySQL                                    string
	Etcd                                     string
	// Session asks PostgreSQL or MySQL for session mode (SessionMutex);
	// only commands that take locks register it.
	Session       bool
	TLS           TLSFlags
	RestartWindow time.Duration // Redlock; 0: redlock's default
	// PasswordFile names a file whose first line is the password of the
	// lock service, for a URL or DSN that carries none, or of EtcdUser.
	PasswordFile string
	// ZKAuthFile names a file whose first line is user:password, for
	// ZooKeeper's digest authentication (zklock.WithDigestAuth).
	ZKAuthFile string
	// EtcdUser is the etcd user to authenticate as.
	EtcdUser string
	// Table is the table of PostgreSQL's or MySQL's locks; "" for the
	// library's default.
	Table string
}

// Register adds the backend flags to fs: each backend's own (--redis,
// --zk, ...), and those they share.
func (f *Flags) Register(fs *flag.FlagSet) {
	for _, d := range drivers {
		if d.flags != nil {
			d.flags(fs, f)
		}
	}
	fs.StringVar(&f.Table, "table", "", "PostgreSQL or MySQL: the table of the locks' rows, name or schema.name (default "+pglock.DefaultTable+"); every client of a lock must use the same; 'dlock schema' prints the SQL that creates it")
	fs.StringVar(&f.PasswordFile, "password-file", "", "read the password of the lock service from this file's first line, for a --redis URL, --postgres URL or --mysql DSN that carries none, or of --etcd-user, so that it is not on the command line, which every user can read")
	f.TLS.register(fs)
}

// RegisterSession adds --session, for the commands that take locks.
func (f *Flags) RegisterSession(fs *flag.FlagSet) {
	fs.BoolVar(&f.Session, "session", false, "PostgreSQL or MySQL: session mode (SessionMutex) rather than lease mode, in which the holder also keeps a connection with an advisory lock (GET_LOCK on MySQL) and learns soon when the database ends its session")
}

// A Spec is a checked choice of backend.
type Spec struct {
	Redis []*redis.Options // one: a single instance; three or more: Redlock
	// RedisCluster is a Redis Cluster, RedisSentinel a master that
	// Sentinels monitor; nil for none.
	RedisCluster  *redis.ClusterOptions
	RedisSentinel *redis.FailoverOptions
	ZK            []string        // ZooKeeper servers
	ZKChroot      string          // the chroot of the ZooKeeper connect string, "/app"; "" for none
	ZKTLS         *tls.Config     // ZooKeeper over TLS (its secureClientPort); nil for plain TCP
	Postgres      *pgxpool.Config // PostgreSQL
	MySQL         *mysql.Config   // MySQL or MariaDB
	Etcd          []string        // etcd endpoints
	EtcdTLS       *tls.Config     // etcd over TLS; nil for plain TCP
	// EtcdUser and EtcdPassword authenticate to etcd; "" for none.
	EtcdUser, EtcdPassword string
	// ZKUser and ZKPassword authenticate to ZooKeeper with the digest
	// scheme (zklock.WithDigestAuth); "" for none.
	ZKUser, ZKPassword string
	Session            bool // PostgreSQL or MySQL session mode
	// Table is the table of PostgreSQL's or MySQL's locks; "" for the
	// library's default.
	Table string
	// ReadOnly is for inspect and release: PostgreSQL's and MySQL's
	// table is not created (a missing table holds no lock).
	ReadOnly bool
	// Warnings are what the command must tell the user before it goes on
	// (a TLS connection that does not verify the server).
	Warnings []string
	// LongestTTL is the longest lease time the command will ask for; with
	// Redlock it widens the restart window to it, if it is above the
	// window (redlock.WithRestartWindow).
	LongestTTL time.Duration
	// RestartWindow is Redlock's restart window; 0 means redlock's
	// default.
	RestartWindow time.Duration
	// Log, if not nil, receives the log lines of the backends' own
	// clients (zklock's, etcdlock's: a server older than they need, a
	// session given up); nil discards them, so that a command's stderr
	// holds only what the command says (-v sets it).
	Log *slog.Logger
}

// log returns s.Log, or a logger that discards everything.
func (s Spec) log() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// Kind names the backend: "redis", "redlock", "zookeeper", "postgres",
// "mysql" or "etcd"; "" if s names no service.
func (s Spec) Kind() string {
	if d := driverOf(s); d != nil {
		return d.name
	}
	return ""
}

// Resolve checks the flags, filling in those not given from the
// environment, and returns the backend they describe. Its errors are
// UsageErrors that say what to change.
func (f *Flags) Resolve(getenv func(string) string) (Spec, error) {
	g := *f // filled in from the environment, f left as given
	var named []*driver
	for _, d := range drivers {
		if d.given != nil && d.given(&g) {
			named = append(named, d)
		}
	}
	if len(named) == 0 {
		for _, d := range drivers {
			if d.fromEnv != nil {
				d.fromEnv(&g, getenv)
				if d.given(&g) {
					named = append(named, d)
				}
			}
		}
	}
	services := func(d *driver) bool { return d.flag != "" }
	envs := each(services, func(d *driver) string { return d.env[0] })
	switch {
	case len(named) == 0:
		return Spec{}, cmdutil.Usagef("no lock service: give %s (or set %s)", inWords(each(services, func(d *driver) string { return d.example }), " or "), inWords(envs, " or "))
	case len(named) > 1:
		return Spec{}, cmdutil.Usagef("more than one lock service was given (%s, by flags or %s); choose one", strings.Join(each(services, func(d *driver) string { return d.title }), ", "), strings.Join(envs, "/"))
	}
	d := named[0]
	if d.check != nil {
		if err := d.check(&g); err != nil {
			return Spec{}, err
		}
	}
	if f.Session && !d.session {
		sessions := func(d *driver) bool { return d.session }
		return Spec{}, cmdutil.Usagef("--session is %s session mode; it needs %s", inWords(each(sessions, func(d *driver) string { return d.title + "'s" }), " and "), inWords(each(sessions, func(d *driver) string { return "--" + d.flag }), " or "))
	}
	if f.RestartWindow < 0 {
		return Spec{}, cmdutil.Usagef("--restart-window %v is negative", f.RestartWindow)
	}
	spec := Spec{RestartWindow: f.RestartWindow, Session: f.Session, Table: f.Table}
	f.TLS.resolve(getenv)
	g.TLS = f.TLS
	// A flag given without its service first, then one that does not go
	// with the service named.
	for _, o := range append(slices.DeleteFunc(slices.Clone(drivers), func(o *driver) bool { return o == d }), d) {
		if o.checkFlags != nil {
			if err := o.checkFlags(&g, getenv, o == d); err != nil {
				return Spec{}, err
			}
		}
	}
	filed := ""
	if f.PasswordFile != "" {
		var err error
		if filed, err = ReadPasswordFile(f.PasswordFile); err != nil {
			return Spec{}, err
		}
	}
	if err := d.resolve(&g, getenv, filed, &spec); err != nil {
		return Spec{}, err
	}
	if f.Table != "" && !driverOf(spec).table {
		tables := func(d *driver) bool { return d.table }
		return Spec{}, cmdutil.Usagef("--table applies to %s only (%s), not to %s", inWords(each(tables, func(d *driver) string { return d.title }), " and "), inWords(each(tables, func(d *driver) string { return "--" + d.flag }), " or "), driverOf(spec).title)
	}
	if f.RestartWindow != 0 && spec.Kind() != "redlock" {
		return Spec{}, cmdutil.Usagef("--restart-window applies to Redlock only (three or more --redis URLs), not to %s", driverOf(spec).title)
	}
	return spec, nil
}

// each returns what show says of each driver that f picks, in the
// drivers' order.
func each(f func(d *driver) bool, show func(d *driver) string) []string {
	var s []string
	for _, d := range drivers {
		if f(d) {
			s = append(s, show(d))
		}
	}
	return s
}

// inWords joins s for people: "a, b" then last then "c".
func inWords(s []string, last string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + last + s[len(s)-1]
}

// ReadPasswordFile returns the password in the first line of the file
// name, and notes it for cmdutil.Redact. An empty first line is an error.
func ReadPasswordFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", cmdutil.Usagef("--password-file: %v", err)
	}
	password, _, _ := strings.Cut(string(b), "\n")
	password = strings.TrimSuffix(password, "\r")
	if password == "" {
		return "", cmdutil.Usagef("--password-file %s: the first line is empty", name)
	}
	cmdutil.NoteSecret(password)
	return password, nil
}

// credentialsHint is what a message about a server address adds when the
// address carries user information, user:password@host:port, which
// --zk and --etcd do not take.
func credentialsHint(addr, flag string) string {
	if !strings.Contains(addr, "@") {
		return ""
	}
	return "; credentials do not go in the address: give " + flag
}
