package zklock

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/go-zookeeper/zk"
)

// Defaults of the options.
const (
	// DefaultSessionTimeout is the session timeout New asks for when
	// WithSessionTimeout is not given. The ensemble may grant another: by
	// default, between 2 and 20 of its ticks.
	DefaultSessionTimeout = 10 * time.Second

	// DefaultTTL is the lease time of a lock when WithTTL is not given.
	DefaultTTL = 30 * time.Second

	// MinTTL is the shortest TTL accepted.
	MinTTL = 10 * time.Millisecond

	// MaxTTL is the longest TTL accepted: a lease is renewed while held,
	// so a longer TTL would only keep the lock of a holder that died from
	// the next one for longer.
	MaxTTL = 24 * time.Hour
)

// A ClientOption configures New.
type ClientOption func(*clientConfig)

type clientConfig struct {
	timeout time.Duration
	acl     []zk.ACL    // nil until WithACL: see newClientConfig
	aclSet  bool        // WithACL was given
	auth    []string    // "user:password" for the digest scheme
	tls     *tls.Config // from WithTLS; nil for plain TCP
	log     *slog.Logger
	onEvent func(zk.Event)
	obs     dlock.Observer // from WithObserver
	lockLog *slog.Logger   // from WithLogger, for lock events; nil for none
	err     error          // from an option given bad arguments
}

func newClientConfig(opts []ClientOption) clientConfig {
	c := clientConfig{timeout: DefaultSessionTimeout, log: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.acl != nil:
	case len(c.auth) > 0: // only the authenticated user, whatever scheme it used
		c.acl = zk.AuthACL(zk.PermAll)
	default:
		c.acl = zk.WorldACL(zk.PermAll)
	}
	return c
}

func (c *clientConfig) check() error {
	if c.err != nil {
		return c.err
	}
	if c.timeout <= 0 {
		return fmt.Errorf("zklock: session timeout %v must be positive; set it with WithSessionTimeout", c.timeout)
	}
	return nil
}

// WithSessionTimeout sets the session timeout to ask the ensemble for: how
// long the ensemble keeps the session, and with it every lock it holds,
// after it last heard from the client. The default is
// DefaultSessionTimeout (10s). The ensemble clamps it to its own bounds
// (minSessionTimeout and maxSessionTimeout, 2 and 20 ticks by default), and
// the Client uses the smaller of the asked and the granted timeout.
func WithSessionTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.timeout = d }
}

// WithACL sets the ACL of every node the Client creates: lock nodes and
// any missing parents. The default is zk.WorldACL(zk.PermAll), or, with
// WithDigestAuth, zk.AuthACL(zk.PermAll): all rights to the user the
// Client authenticated as, and none to anyone else. Every
// client of a lock needs to read its path's children and to create and
// delete children there. Unless the ACL gives everyone those rights, a
// Lock or TryLock refuses a lock path, made by another, whose own ACL
// lets someone the ACL does not name create or delete there
// (ErrPathACL): ZooKeeper takes the right to delete a holder's node from
// its path's ACL.
func WithACL(acl ...zk.ACL) ClientOption {
	return func(c *clientConfig) {
		if len(acl) == 0 {
			c.err = errors.New("zklock: WithACL needs at least one ACL entry")
			return
		}
		c.acl, c.aclSet = acl, true
	}
}

// WithDigestAuth authenticates the session as user with the digest
// scheme, on every connection it makes, and makes the nodes the Client
// creates readable and writable by that user only (unless WithACL says
// otherwise): every Client of a lock must then authenticate as the same
// user. A lock path that another made, whose ACL lets others create or
// delete its children, is refused (ErrPathACL; see WithACL). The default is no authentication. Digest credentials travel in
// clear unless the connection is encrypted: see WithTLS.
func WithDigestAuth(user, password string) ClientOption {
	return func(c *clientConfig) {
		if user == "" || strings.Contains(user, ":") {
			c.err = fmt.Errorf("zklock: WithDigestAuth: user %q must be non-empty and must not contain ':'", user)
			return
		}
		c.auth = append(c.auth, user+":"+password)
	}
}

// WithTLS has the Client speak TLS, configured by cfg, with every server
// it connects to: each server's secure client port (secureClientPort),
// where the ensemble has one. Unless cfg.ServerName is set, each server's
// certificate must be valid for the host of its address, as with
// tls.Dial; cfg.RootCAs is the CA to trust (nil: the system's), and
// cfg.Certificates the client certificate for a server that asks for one.
// New fails, once ctx is done, with the last handshake error if no server
// completes one, and names a handshake still under way then. The default
// is plain TCP, on which the session, the locks' data and WithDigestAuth's
// credentials travel in clear.
func WithTLS(cfg *tls.Config) ClientOption {
	return func(c *clientConfig) {
		if cfg == nil {
			c.err = errors.New("zklock: WithTLS: the *tls.Config is nil; pass one, such as &tls.Config{RootCAs: pool}")
			return
		}
		c.tls = cfg
	}
}

// WithLogger sets where the Client logs. It logs the ZooKeeper client's
// own messages (connections, reconnections) at Debug, and a node it could
// not clean up at Warn; without WithLogger, or with a nil l, these go to
// slog.Default(). It also logs the events of every lock of the Client,
// through dlock.LogObserver: losses at Warn, failed confirmations and
// failed acquisitions with a hard error at Info, the rest at Debug; the
// default is none, and a nil l means none. It combines with WithObserver.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) {
		c.lockLog = l
		if l != nil {
			c.log = l
		}
	}
}

// WithObserver has every lock of the Client report its events to o (see
// dlock.Observer): the start, wait and outcome of each Lock and TryLock,
// and each lease's confirmations that extend it (EventRenewed), failed
// confirmations, loss and release. o is called synchronously, on the
// caller's goroutine or the watchdog's, and must be quick. Package
// dlockprom turns the events into Prometheus metrics. The default is
// none; a nil o means none. It combines with WithLogger.
func WithObserver(o dlock.Observer) ClientOption {
	return func(c *clientConfig) { c.obs = o }
}

// WithEventCallback has f called with every event of the underlying
// connection: session state changes and watch notifications. It is called
// on the connection's own goroutine and must not block. When the Client
// gives up a session and opens a new connection (see Client), f sees the
// new connection's events from the moment it has a session, and no more
// of the old one's. The default is none.
func WithEventCallback(f func(zk.Event)) ClientOption {
	return func(c *clientConfig) { c.onEvent = f }
}

// An Option configures a lock. There is no WithRetry: a waiter keeps its
// place in the lock's queue and is woken by a watch when its turn comes,
// so there is nothing to retry; bound a wait with ctx.
type Option func(*config)

type config struct {
	ttl     time.Duration
	renew   bool
	maxHold time.Duration
}

func newConfig(opts []Option) config {
	c := config{ttl: DefaultTTL, renew: true}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

func (c config) check() error {
	if err := lease.CheckTTL("zklock", c.ttl, MinTTL, MaxTTL); err != nil {
		return err
	}
	if c.maxHold < 0 {
		return fmt.Errorf("zklock: WithMaxHold(%v): want a positive duration, or 0 for no cap", c.maxHold)
	}
	return nil
}

// WithTTL sets the lease time: how long a lease lasts after the last time
// it was confirmed. The default is DefaultTTL (30s). A ZooKeeper lock is
// held as long as the session lives, so a lease can never count on more
// than a third of the session timeout (see "Why a lease lasts T/3" under
// zklock in docs/ARCHITECTURE.md); the lease time in force is the smaller
// of the two. It must be between MinTTL and MaxTTL.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithoutRenewal makes a fixed lease: it ends, with an error matching
// dlock.ErrExpired, one TTL after it was granted (or last refreshed), and
// its node is then deleted. Ownership is still confirmed in the
// background, so the lease also ends early if the session cannot be
// confirmed. Renewal is on by default.
func WithoutRenewal() Option { return func(c *config) { c.renew = false } }

// WithMaxHold caps how long one lease can be held: the watchdog confirms
// it until d after it was granted and no further, and the lease then ends,
// with an error matching dlock.ErrMaxHold and dlock.ErrLost, and its node
// is deleted. Until never passes the cap, so Done closes by then. Holds
// taken again by the same owner share the first hold's cap. The default
// is 0: no cap.
func WithMaxHold(d time.Duration) Option { return func(c *config) { c.maxHold = d } }
