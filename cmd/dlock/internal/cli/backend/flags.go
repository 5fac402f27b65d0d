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
	EnvEtcdUser      = "DLOCK_ETCD_USER"      // the etcd user
	EnvEtcdPassword  = "DLOCK_ETCD_PASSWORD"  // its password
)

// ConnectionEnv lists the environment variables that tell dlock how to
// reach the lock service, credentials included: dlock run removes them
// from COMMAND's environment.
var ConnectionEnv = []string{EnvRedis, EnvRedisPassword, EnvZK, EnvZKAuthFile, EnvPostgres, EnvMySQL, EnvEtcd, EnvEtcdUser, EnvEtcdPassword, EnvTLSCA, EnvTLSCert, EnvTLSKey, EnvTLSServerName}

// PasswordEnv lists the variables of ConnectionEnv that hold a password
// alone.
var PasswordEnv = []string{EnvRedisPassword, EnvEtcdPassword}

// IsConnectionEnv reports whether kv, a "NAME=value" environment entry,
// sets one of ConnectionEnv.
func IsConnectionEnv(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	return slices.Contains(ConnectionEnv, name)
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

// Register adds --redis and --zk to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.Var(&f.Redis, "redis", "Redis URL, redis://[user:password@]host:port[/db] or rediss:// for TLS; give it 3 or more times for Redlock (env "+EnvRedis+")")
	fs.StringVar(&f.ZK, "zk", "", "ZooKeeper servers, host:port[,host:port...] (env "+EnvZK+")")
	fs.StringVar(&f.Etcd, "etcd", "", "etcd endpoints, host:port[,host:port...] (env "+EnvEtcd+")")
	fs.StringVar(&f.Postgres, "postgres", "", "PostgreSQL URL, postgres://user:password@host:port/db (env "+EnvPostgres+")")
	fs.StringVar(&f.MySQL, "mysql", "", "MySQL or MariaDB DSN, user:password@tcp(host:port)/db, or mysql://user:password@host:port/db (env "+EnvMySQL+")")
	fs.StringVar(&f.PasswordFile, "password-file", "", "read the password of the lock service from this file's first line, for a --redis URL, --postgres URL or --mysql DSN that carries none, or of --etcd-user, so that it is not on the command line, which every user can read")
	fs.StringVar(&f.ZKAuthFile, "zk-auth-file", "", "ZooKeeper: authenticate with the digest scheme as the user:password on this file's first line, and make the lock's nodes that user's alone (env "+EnvZKAuthFile+")")
	fs.StringVar(&f.EtcdUser, "etcd-user", "", "etcd: authenticate as this user, with the password of --password-file or "+EnvEtcdPassword+" (env "+EnvEtcdUser+")")
	f.TLS.register(fs)
	fs.DurationVar(&f.RestartWindow, "restart-window", 0, "Redlock: how long a node whose server restarted sits out (redlock.WithRestartWindow); every client of the nodes must use the same; default 30s (dlock run: or its --ttl, if longer)")
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
	urls, zkList, pg, my, etcdList := []string(f.Redis), f.ZK, f.Postgres, f.MySQL, f.Etcd
	if len(urls) == 0 && zkList == "" && pg == "" && my == "" && etcdList == "" {
		if v := getenv(EnvRedis); v != "" {
			urls = SplitURLs(v)
		}
		zkList, pg, my, etcdList = getenv(EnvZK), getenv(EnvPostgres), getenv(EnvMySQL), getenv(EnvEtcd)
	}
	given := 0
	for _, g := range []bool{len(urls) > 0, zkList != "", pg != "", my != "", etcdList != ""} {
		if g {
			given++
		}
	}
	switch {
	case given == 0:
		return Spec{}, cmdutil.Usagef("no lock service: give --redis redis://host:port, --zk host:port, --postgres postgres://host:port/db, --mysql user:password@tcp(host:port)/db or --etcd host:port (or set %s, %s, %s, %s or %s)", EnvRedis, EnvZK, EnvPostgres, EnvMySQL, EnvEtcd)
	case given > 1:
		return Spec{}, cmdutil.Usagef("more than one lock service was given (Redis, ZooKeeper, PostgreSQL, MySQL, etcd, by flags or %s/%s/%s/%s/%s); choose one", EnvRedis, EnvZK, EnvPostgres, EnvMySQL, EnvEtcd)
	case len(urls) == 2:
		return Spec{}, cmdutil.Usagef("two Redis URLs: give one for a single Redis, or three or more independent masters for Redlock (a majority of two is both)")
	case f.Session && pg == "" && my == "":
		return Spec{}, cmdutil.Usagef("--session is PostgreSQL's and MySQL's session mode; it needs --postgres or --mysql")
	}
	if f.RestartWindow < 0 {
		return Spec{}, cmdutil.Usagef("--restart-window %v is negative", f.RestartWindow)
	}
	spec := Spec{RestartWindow: f.RestartWindow}
	f.TLS.resolve(getenv)
	switch {
	case f.ZKAuthFile != "" && zkList == "":
		return Spec{}, cmdutil.Usagef("--zk-auth-file goes with --zk")
	case f.EtcdUser != "" && etcdList == "":
		return Spec{}, cmdutil.Usagef("--etcd-user goes with --etcd")
	case f.PasswordFile != "" && zkList != "":
		return Spec{}, cmdutil.Usagef("--password-file does not go with --zk; give ZooKeeper's user:password in --zk-auth-file")
	case f.PasswordFile != "" && etcdList != "" && f.EtcdUser == "" && getenv(EnvEtcdUser) == "":
		return Spec{}, cmdutil.Usagef("--password-file with --etcd is the password of --etcd-user, which is missing")
	}
	filed := ""
	if f.PasswordFile != "" {
		var err error
		if filed, err = ReadPasswordFile(f.PasswordFile); err != nil {
			return Spec{}, err
		}
	}
	if pg != "" {
		cfg, err := parsePostgres(pg)
		if err != nil {
			return Spec{}, err
		}
		if filed != "" {
			if hasPassword(pg) {
				return Spec{}, cmdutil.Usagef("--password-file and a password in the --postgres URL: give one")
			}
			cfg.ConnConfig.Password = filed
		}
		if f.TLS.given() {
			if err := f.TLS.applyPostgres(cfg); err != nil {
				return Spec{}, err
			}
		}
		spec.Postgres, spec.Session = cfg, f.Session
		return spec, nil
	}
	if my != "" {
		if f.TLS.given() {
			return Spec{}, cmdutil.Usagef("the TLS flags do not apply to --mysql; set TLS in the DSN (tls=true, or a registered configuration)")
		}
		cfg, err := parseMySQL(my)
		if err != nil {
			return Spec{}, err
		}
		if filed != "" {
			if cfg.Passwd != "" {
				return Spec{}, cmdutil.Usagef("--password-file and a password in the --mysql DSN: give one")
			}
			cfg.Passwd = filed
		}
		spec.MySQL, spec.Session = cfg, f.Session
		return spec, nil
	}
	if etcdList != "" {
		endpoints, err := parseEtcd(etcdList)
		if err != nil {
			return Spec{}, err
		}
		spec.Etcd = endpoints
		if spec.EtcdUser, spec.EtcdPassword, err = f.etcdAuth(getenv, filed); err != nil {
			return Spec{}, err
		}
		if f.TLS.given() {
			if spec.EtcdTLS, err = f.TLS.config(nil); err != nil {
				return Spec{}, err
			}
		}
		return spec, nil
	}
	if zkList != "" {
		servers, err := parseZK(zkList)
		if err != nil {
			return Spec{}, err
		}
		spec.ZK = servers
		if file := cmp.Or(f.ZKAuthFile, getenv(EnvZKAuthFile)); file != "" {
			if spec.ZKUser, spec.ZKPassword, err = readZKAuth(file); err != nil {
				return Spec{}, err
			}
		}
		if f.TLS.given() { // any TLS flag: the servers are secure client ports
			if spec.ZKTLS, err = f.TLS.config(nil); err != nil {
				return Spec{}, err
			}
		}
		return spec, nil
	}
	seen := map[string]bool{}
	password := getenv(EnvRedisPassword)
	if filed != "" {
		password = filed
	}
	for _, u := range urls {
		o, err := parseRedis(u)
		if err != nil {
			return Spec{}, err
		}
		switch {
		case o.Password != "" && filed != "":
			return Spec{}, cmdutil.Usagef("--password-file and a password in the --redis URL %q: give one", cmdutil.RedactInput(u))
		case o.Password == "":
			o.Password = password
		}
		if err := f.TLS.applyTLS(o, cmdutil.RedactInput(u), &spec.Warnings); err != nil {
			return Spec{}, err
		}
		if seen[o.Addr] {
			return Spec{}, cmdutil.Usagef("--redis %s is given twice; Redlock needs independent masters", o.Addr)
		}
		seen[o.Addr] = true
		spec.Redis = append(spec.Redis, o)
	}
	return spec, nil
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
