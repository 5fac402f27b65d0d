// Package backend turns the dlock command's backend flags (--redis, --zk,
// --postgres, --etcd)
// and their environment variables into a connected lock service.
package backend

import (
	"cmp"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Environment variables read when the matching flag is not given.
const (
	EnvRedis         = "DLOCK_REDIS"          // Redis URLs, separated by commas or spaces
	EnvRedisPassword = "DLOCK_REDIS_PASSWORD" // the password of Redis URLs that carry none
	EnvZK            = "DLOCK_ZK"             // host:port[,host:port...]
	EnvZKAuthFile    = "DLOCK_ZK_AUTH_FILE"   // a file whose first line is user:password
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
	Redis    urlList
	ZK       string
	Postgres string
	MySQL    string
	Etcd     string
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
}

// Register adds the backend flags to fs: each backend's own (--redis,
// --zk, ...), and those they share.
func (f *Flags) Register(fs *flag.FlagSet) {
	for _, d := range drivers {
		if d.flags != nil {
			d.flags(fs, f)
		}
	}
	fs.StringVar(&f.PasswordFile, "password-file", "", "read the password of the lock service from this file's first line, for a --redis URL, --postgres URL or --mysql DSN that carries none, or of --etcd-user, so that it is not on the command line, which every user can read")
	f.TLS.register(fs)
}

// RegisterSession adds --session, for the commands that take locks.
func (f *Flags) RegisterSession(fs *flag.FlagSet) {
	fs.BoolVar(&f.Session, "session", false, "PostgreSQL or MySQL: session mode (SessionMutex) rather than lease mode, in which the holder also keeps a connection with an advisory lock (GET_LOCK on MySQL) and learns soon when the database ends its session")
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

// A Spec is a checked choice of backend.
type Spec struct {
	Redis    []*redis.Options // one: a single instance; three or more: Redlock
	ZK       []string         // ZooKeeper servers
	ZKTLS    *tls.Config      // ZooKeeper over TLS (its secureClientPort); nil for plain TCP
	Postgres *pgxpool.Config  // PostgreSQL
	MySQL    *mysql.Config    // MySQL or MariaDB
	Etcd     []string         // etcd endpoints
	EtcdTLS  *tls.Config      // etcd over TLS; nil for plain TCP
	// EtcdUser and EtcdPassword authenticate to etcd; "" for none.
	EtcdUser, EtcdPassword string
	// ZKUser and ZKPassword authenticate to ZooKeeper with the digest
	// scheme (zklock.WithDigestAuth); "" for none.
	ZKUser, ZKPassword string
	Session            bool // PostgreSQL or MySQL session mode
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
	spec := Spec{RestartWindow: f.RestartWindow, Session: f.Session}
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

// etcdAuth returns the etcd user and its password: the user from
// --etcd-user or DLOCK_ETCD_USER, the password from --password-file
// (filed) or DLOCK_ETCD_PASSWORD.
func (f *Flags) etcdAuth(getenv func(string) string, filed string) (user, password string, err error) {
	user, password = cmp.Or(f.EtcdUser, getenv(EnvEtcdUser)), cmp.Or(filed, getenv(EnvEtcdPassword))
	switch {
	case user != "" && password == "":
		return "", "", cmdutil.Usagef("--etcd-user %s needs its password: give --password-file FILE or set %s", cmdutil.Quote(user), EnvEtcdPassword)
	case user == "" && password != "":
		return "", "", cmdutil.Usagef("%s is set, but no --etcd-user (or %s) says whose password it is", EnvEtcdPassword, EnvEtcdUser)
	}
	return user, password, nil
}

// readZKAuth returns the user and password in the first line of the file
// name, user:password, as ZooKeeper's addauth digest takes them, and
// notes the password for cmdutil.Redact.
func readZKAuth(name string) (user, password string, err error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return "", "", cmdutil.Usagef("--zk-auth-file: %v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	user, password, ok := strings.Cut(strings.TrimSuffix(line, "\r"), ":")
	cmdutil.NoteSecret(password)
	if !ok || user == "" || password == "" {
		return "", "", cmdutil.Usagef("--zk-auth-file %s: the first line is not user:password", name)
	}
	return user, password, nil
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

// hasPassword reports whether a PostgreSQL URL or connection string
// carries a password: in its user information, or as a parameter or
// keyword.
func hasPassword(raw string) bool {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, set := u.User.Password(); set {
			return true
		}
	}
	return pgPasswordKey.MatchString(raw)
}

// pgPasswordKey matches the password parameter of a PostgreSQL URL or the
// password keyword of a connection string.
var pgPasswordKey = regexp.MustCompile(`(?i)(^|[\s?&])password\s*=`)

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

// parseZK checks a comma-separated list of ZooKeeper servers.
func parseZK(list string) ([]string, error) {
	var servers []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, cmdutil.Usagef("--zk %q has an empty server; want host:port[,host:port...]", cmdutil.RedactInput(list))
		}
		host, port, err := net.SplitHostPort(s)
		if err != nil || host == "" {
			return nil, cmdutil.Usagef("--zk server %q is not host:port (ZooKeeper's client port is usually 2181)%s", cmdutil.RedactInput(s), credentialsHint(s, "--zk-auth-file"))
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, cmdutil.Usagef("--zk server %q: port %q is not a number from 1 to 65535", cmdutil.RedactInput(s), cmdutil.RedactInput(port))
		}
		servers = append(servers, s)
	}
	return servers, nil
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
