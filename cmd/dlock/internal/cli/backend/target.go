package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// A Target is a connected lock service.
type Target struct {
	spec Spec
	drv  *driver
	c    conn

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

// Connect connects to the service spec describes, through its backend's
// driver, and checks that it answers: the Redis instance, a majority of
// Redlock masters, a ZooKeeper session, a database or an etcd cluster.
// obs, if not nil, observes every lock made from it.
func Connect(ctx context.Context, spec Spec, obs dlock.Observer) (*Target, error) {
	d := driverOf(spec)
	if d == nil {
		return nil, cmdutil.Usagef("no lock service given")
	}
	c, err := d.connect(ctx, spec, obs)
	if err != nil {
		if closedOverTLS(err) && tlsWithoutClientCert(spec) {
			// A server that requires a client certificate sends its
			// alert after the handshake, which a client that writes first
			// may see only as a reset.
			err = fmt.Errorf("%w (the server closed the TLS connection: if it requires a client certificate, give --tls-cert and --tls-key)", err)
		}
		return nil, err
	}
	t := &Target{spec: spec, drv: d, c: c}
	if w, ok := c.(warner); ok {
		t.warnings = w.warnings()
	}
	return t, nil
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

// Kind names the backend: "redis", "redlock", "zookeeper", "postgres",
// "mysql" or "etcd".
func (t *Target) Kind() string { return t.spec.Kind() }

// Describe says what the target is, for messages: "redis 127.0.0.1:6379"
// (see Spec.Describe), and on PostgreSQL the TLS the connection
// negotiated.
func (t *Target) Describe() string {
	if d, ok := t.c.(describer); ok {
		return d.describe()
	}
	return t.spec.Describe()
}

// Warnings returns what the command must tell the user about the
// connection before it goes on, one line each: a ZooKeeper session
// timeout longer than --ttl.
func (t *Target) Warnings() []string { return t.warnings }

// Close releases every lease still held and closes the connections.
func (t *Target) Close() {
	if t.c != nil {
		t.c.close()
		t.c = nil
	}
}

// LeaseTime returns the lease time in force for a lock asked to last ttl:
// ttl, except on ZooKeeper, where a lease lasts at most a third of the
// session timeout (see zklock.WithTTL).
func (t *Target) LeaseTime(ttl time.Duration) time.Duration {
	if l, ok := t.c.(leaseTimer); ok {
		return l.leaseTime(ttl)
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
// of backend (a Spec.Kind: "redis", "zookeeper", ...): every limit the
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
	}
	if d := driverNamed(kind); d != nil && d.checkName != nil {
		return d.checkName(name)
	}
	return nil
}

// CheckKind returns a UsageError if the lock kind is not available on the
// backend spec describes, before anything is contacted.
func CheckKind(spec Spec, kind string) error {
	if d := driverOf(spec); kind != KindMutex && d != nil && d.checkKind != nil {
		return d.checkKind(spec, kind)
	}
	return nil
}

// Locker returns the lock called name of the kind o asks for.
func (t *Target) Locker(name string, o LockOptions) (dlock.Locker, error) {
	if err := CheckKind(t.spec, o.Kind); err != nil {
		return nil, err
	}
	return t.c.locker(name, o)
}

// Election returns the election called name, whose leader holds a mutex
// of that name for ttl at a time, renewed while it leads.
func (t *Target) Election(name string, ttl time.Duration) (dlock.Election, error) {
	return t.c.election(name, ttl)
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

// closedOverTLS reports whether err is a connection the server reset or
// closed, as a TLS server that wants a client certificate does.
func closedOverTLS(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "connection reset by peer")
}

// tlsWithoutClientCert reports whether spec speaks TLS to its servers
// without a client certificate.
func tlsWithoutClientCert(spec Spec) bool {
	noCert := func(c *tls.Config) bool {
		return c != nil && len(c.Certificates) == 0 && c.GetClientCertificate == nil
	}
	for _, o := range spec.Redis {
		if noCert(o.TLSConfig) {
			return true
		}
	}
	if o := spec.RedisCluster; o != nil && noCert(o.TLSConfig) {
		return true
	}
	if o := spec.RedisSentinel; o != nil && noCert(o.TLSConfig) {
		return true
	}
	if noCert(spec.ZKTLS) || noCert(spec.EtcdTLS) {
		return true
	}
	return spec.Postgres != nil && noCert(spec.Postgres.ConnConfig.TLSConfig)
}
