package zklock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/background"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
	"github.com/go-zookeeper/zk"
)

// A Client is one ZooKeeper session, on a connection of its own, and the
// locks made from it: every lock node it creates is an ephemeral node of
// the session, so the ensemble deletes them all if the session expires.
// One Client per process is the usual arrangement; it is safe for
// concurrent use.
//
// A Client watches its connection. While the connection is down the
// session may or may not still be alive: every lease reports Suspended,
// and a lease that cannot be confirmed ends at its Until. When the
// ensemble reports the session expired, every lease ends at once with an
// error matching dlock.ErrLost and ErrSessionExpired, and the Client
// carries on with a new session. If no server takes the session back
// within the session timeout (an ensemble that lost its data refuses it
// for ever, and never reports it expired), the Client gives it up as
// Curator does: its leases, which had ended by their Until, report
// ErrSessionExpired, and the Client opens a new connection with a new
// session, so later calls work again.
type Client struct {
	servers []string
	cfg     clientConfig
	link    atomic.Pointer[link] // the connection in use
	renew   *renewal.Scheduler
	leases  lease.Registry
	obs     dlock.Observer // from WithObserver and WithLogger; nil for none

	noContainers atomic.Bool // the ensemble has no container nodes (before 3.5.3)

	mu         sync.Mutex
	id         int64     // the current session's ID; 0 while there is none
	suspended  bool      // the connection is down: ownership is uncertain
	lostConn   time.Time // when the connection with a session was lost; zero while it has one
	granted    time.Duration
	nodes      map[*node]struct{}
	owners     map[ownerKey]*node    // held nodes by lock path and owner token
	aclOK      map[string]aclChecked // lock paths whose ACL passed checkACL
	aclGranted map[string]int32      // the rights the Client's ACL gives, by identity; nil until read
	giveUp     *time.Timer           // while the connection is down: see giveUpSession
	closed     bool                  // Close has begun: no new connection is made
	closing    chan struct{}         // closed when Close begins
	retiring   sync.WaitGroup        // connections being replaced and closed

	ready     chan struct{} // closed at the first session
	readyOnce sync.Once
	// heard is closed when go-zookeeper first logs a granted session with
	// its timeout, just after it reports the session (ready).
	heard     chan struct{}
	heardOnce sync.Once

	bg background.Group // clean-ups of nodes that interrupted calls may have left

	connErr connErrors // the last failure to connect or to talk to a server

	// afterParents, set by tests only (export_test.go) before the Client's
	// first lock, runs each time ensureParents has made the parents of dir
	// for a lock node, just before the node's create: a test deletes them
	// there, as the ensemble's reaper or another client's clean-up may.
	afterParents func(dir string)
}

type ownerKey struct{ dir, owner string }

// New opens a session with the ZooKeeper ensemble at servers
// ("host:port"; the port defaults to 2181) and returns once the ensemble
// has granted it, or when ctx is done. With WithDigestAuth, it also
// authenticates before returning. The caller must Close the Client.
func New(ctx context.Context, servers []string, opts ...ClientOption) (*Client, error) {
	cfg := newClientConfig(opts)
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	s := &Client{servers: servers, cfg: cfg, obs: lease.Observer(cfg.obs, cfg.lockLog),
		nodes: make(map[*node]struct{}), owners: make(map[ownerKey]*node), aclOK: map[string]aclChecked{}, ready: make(chan struct{}),
		heard: make(chan struct{}), closing: make(chan struct{})}
	l, err := s.dial()
	if err != nil {
		return nil, fmt.Errorf("zklock: connecting to %v: %w", servers, err)
	}
	s.install(l)
	conn := l.conn
	fail := func(err error) (*Client, error) {
		s.mu.Lock()
		s.closed = true
		s.stopGiveUpLocked()
		s.mu.Unlock()
		l.close(drainTimeout)
		<-l.loopDone
		if cur := s.link.Load(); cur != nil && cur != l { // a session that replaced l's
			cur.close(drainTimeout)
			<-cur.loopDone
		}
		return nil, err
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return fail(s.noSession(ctx, conn.State()))
	}
	// go-zookeeper reports the session before it logs the timeout the
	// ensemble granted; a lease taken before that would compute its Until
	// from the timeout asked for, which may be longer. The line follows at
	// once; should a later go-zookeeper stop logging it, waiting a second
	// costs only this New.
	select {
	case <-s.heard:
	case <-time.After(time.Second):
	case <-ctx.Done():
		return fail(s.noSession(ctx, conn.State()))
	}
auth:
	for _, cred := range cfg.auth {
		// A connection that closes under the request (go-zookeeper then
		// connects again) is tried again until ctx ends: adding the same
		// credentials twice to a session is harmless, and go-zookeeper
		// re-sends them on its reconnects only once one was answered. A
		// session given up meanwhile (no server took it back within its
		// timeout) was replaced by one that sent every credential before
		// it was installed; the old connection stays closed.
		for n := 1; ; n++ {
			if s.link.Load() != l {
				break auth
			}
			_, err := await(ctx, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", []byte(cred)) })
			if err == nil {
				break
			}
			if !transient(err) || pause(ctx, n) != nil {
				return fail(fmt.Errorf("zklock: digest authentication with %v: %w", servers, err))
			}
		}
	}
	s.renew = renewal.New(s.renewBatch)
	return s, nil
}

// noSession is New's error when ctx is done before the ensemble granted
// a session. It wraps ctx.Err() and the last error met while connecting,
// such as a failed TLS handshake, and names a TLS handshake still under
// way (a server slow to answer it, or silent).
func (s *Client) noSession(ctx context.Context, state zk.State) error {
	why := fmt.Sprintf("state %v", state)
	if shaking := s.connErr.underWay(); shaking != "" {
		why += "; " + shaking
	}
	if last := s.connErr.get(); last != nil {
		return fmt.Errorf("zklock: no session with %v: %w (%s; last error: %w)", s.servers, ctx.Err(), why, last)
	}
	return fmt.Errorf("zklock: no session with %v: %w (%s)", s.servers, ctx.Err(), why)
}

// checkServers returns an error naming the first bad server address.
func checkServers(servers []string) error {
	if len(servers) == 0 {
		return errors.New("zklock: no ZooKeeper servers given; pass at least one host:port")
	}
	for _, srv := range servers {
		host, port, err := net.SplitHostPort(srv)
		if err != nil && !strings.Contains(srv, ":") {
			host, port, err = srv, "2181", nil // go-zookeeper's default port
		}
		if err != nil || !validHost(host) {
			return fmt.Errorf("zklock: server address %q: want host:port, such as 127.0.0.1:2181", srv)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("zklock: server address %q: port %q is not a number from 1 to 65535", srv, port)
		}
	}
	return nil
}

// validHost reports whether h could be a host name or an IP address.
func validHost(h string) bool {
	if net.ParseIP(h) != nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, r := range h {
		if !(r == '-' || r == '.' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// authenticatedFormat is how go-zookeeper logs a granted session: the only
// place it reveals the negotiated timeout. A test checks that it still
// does; if it stops, the Client falls back to the timeout it asked for.
const authenticatedFormat = "authenticated: id=%d, timeout=%d"

// zkLogger receives go-zookeeper's log messages.
type zkLogger struct{ s *Client }

func (l zkLogger) Printf(format string, args ...any) {
	if format == authenticatedFormat && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.s.mu.Lock()
			if d := time.Duration(ms) * time.Millisecond; l.s.granted == 0 || d < l.s.granted {
				l.s.granted = d
			}
			l.s.mu.Unlock()
			l.s.heardOnce.Do(func() { close(l.s.heard) })
		}
	}
	l.s.cfg.log.Debug("zklock: zookeeper client: " + fmt.Sprintf(format, args...))
}

// sessionEnded ends, with dlock.ErrLost wrapping cause, every lease held
// in the session id. If the ensemble expired the session, it has deleted
// their nodes; if the Client gave it up (clean), they are deleted in the
// background, in case the ensemble still has them.
func (s *Client) sessionEnded(id int64, cause error, clean bool) {
	s.mu.Lock()
	var lost []*node
	for n := range s.nodes {
		if n.session == id {
			lost = append(lost, n)
		}
	}
	s.mu.Unlock()
	for _, n := range lost {
		n.lose(cause)
		if clean {
			s.removeLater(n.path)
		}
	}
}

// ID returns the current session's ID, or 0 while the Client has none
// (between an expiry and the next session).
func (s *Client) ID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Suspended reports whether the connection is down while the session may
// still be alive: ownership of every lease is uncertain until the client
// reconnects (the lease holds on) or the ensemble reports the session
// expired (every lease is lost).
func (s *Client) Suspended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.suspended
}

// Timeout returns the session timeout in force: the smaller of the one
// asked for (WithSessionTimeout) and the one the ensemble granted.
func (s *Client) Timeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.timeoutLocked()
}

// GrantedTimeout returns the session timeout the ensemble granted, or 0
// if the Client has not learnt it. The ensemble clamps the timeout asked
// for (WithSessionTimeout) to its minSessionTimeout and maxSessionTimeout,
// so it may be longer than the one asked for: the ensemble keeps the
// session, and the locks of a client that died, that long after it last
// heard from it, while the Client's leases last by Timeout.
func (s *Client) GrantedTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.granted
}

// timeoutLocked is Timeout; s.mu must be held.
func (s *Client) timeoutLocked() time.Duration {
	if s.granted > 0 && s.granted < s.cfg.timeout {
		return s.granted
	}
	return s.cfg.timeout
}

// Conn returns the connection in use, for other work in the same
// session. Do not close it; close the Client. The Client replaces it
// when it gives up a session (see Client): call Conn again rather than
// keeping it. Let calls on it return before Close: go-zookeeper may still
// be writing a call's reply into the call's result after closing the
// connection returned the call early.
func (s *Client) Conn() *zk.Conn { return s.zk() }

// Close waits for the ensemble at most closeReleases for the releases of
// the leases still held (and for the calls under way to end), and
// closeWait in all.
const (
	closeReleases = time.Second
	closeWait     = 1500 * time.Millisecond
)

// Close releases every lease the Client still holds, stops renewing,
// finishes the clean-ups of failed and released attempts (deleting the
// nodes they may have left), and closes the session, which deletes any
// node of it that is left. It waits for the ensemble at most a second for
// the releases, and a second and a half in all, so that a Client closed
// while the ensemble does not answer closes in that time; a node it could
// not delete goes when the ensemble expires the session, one session
// timeout later, and Close reports the failure. Every held lease ends with
// dlock.ErrReleased; Close returns the errors of the releases that did not
// complete.
func (s *Client) Close() error {
	begin := time.Now()
	first, err := s.leases.Close(closeReleases, ErrClosed)
	if !first {
		return nil
	}
	s.renew.Close()
	if !s.bg.Finish(closeWait - time.Since(begin)) {
		err = errors.Join(err, fmt.Errorf("zklock: Close: clean-ups of interrupted calls did not finish within %v; their nodes go when the ensemble expires the session", closeWait))
	}
	s.mu.Lock()
	s.closed = true
	s.stopGiveUpLocked()
	close(s.closing)
	s.mu.Unlock()
	s.retiring.Wait() // a replacement of the connection under way stops
	l := s.link.Load()
	l.close(closeWait - time.Since(begin))
	select {
	case <-l.loopDone:
	case <-time.After(max(closeWait-time.Since(begin), drainTimeout)):
	}
	return err
}

// usable returns the error every call on a closed Client returns.
func (s *Client) usable() error {
	if s.leases.Closed() {
		return ErrClosed
	}
	return nil
}

// result is the outcome of a blocking go-zookeeper call.
type result[T any] struct {
	v   T
	err error
}

// start runs op, a blocking go-zookeeper call, on a goroutine of its own.
// go-zookeeper calls take no context; they return when the ensemble
// answers or the connection fails or closes.
func start[T any](op func() (T, error)) <-chan result[T] {
	ch := make(chan result[T], 1)
	go func() {
		v, err := op()
		ch <- result[T]{v, err}
	}()
	return ch
}

// await runs op and returns its result, or ctx's error if ctx is done
// first; op's result is then dropped.
//
// It reports the outcome to the call ctx carries, if any (see report).
func await[T any](ctx context.Context, op func() (T, error)) (T, error) {
	sent := time.Now()
	select {
	case r := <-start(op):
		report(ctx, sent, r.err, false)
		return r.v, r.err
	case <-ctx.Done():
		report(ctx, sent, nil, true)
		var zero T
		return zero, ctx.Err()
	}
}

// retryBackoff spaces out retries after a connection failure.
var retryBackoff = dlock.ExponentialBackoff(10*time.Millisecond, 500*time.Millisecond)

// pause waits before the attempt-th retry, or returns an error matching
// dlock.ErrNotObtained and ctx.Err() if ctx is done first.
func pause(ctx context.Context, attempt int) error {
	d, _ := retryBackoff.Backoff(attempt)
	select {
	case <-ctx.Done():
		return dlock.NotObtained(ctx.Err())
	case <-time.After(d):
		return nil
	}
}

// removeLater deletes the node at path in the background, until it is
// gone or the Client is closed (which deletes it too, with the session).
// Close waits for it (see Close). A node of a session that has ended
// is gone already, or goes when the ensemble expires that session; the
// delete only makes it go sooner.
func (s *Client) removeLater(path string) {
	s.bg.Clean(func(ctx context.Context) background.Outcome { return s.remove(ctx, path) })
}

// remove is one attempt of removeLater.
func (s *Client) remove(ctx context.Context, path string) background.Outcome {
	err := s.delete(ctx, path)
	switch {
	case err == nil, errors.Is(err, zk.ErrNoNode), ctx.Err() != nil:
	case transient(err), errors.Is(err, zk.ErrSessionExpired):
		return background.Unreachable // again, on the next session if need be
	default:
		s.cfg.log.Warn("zklock: cannot delete a lock node; it goes when the session ends", "path", path, "err", err)
	}
	return background.Cleaned
}

// abandonChecks are the pauses between the looks a clean-up takes for a
// node whose create lost its reply: a request delayed on a dead
// connection can still be carried out after a first look.
var abandonChecks = background.LateChecks

// abandon cleans up after a create whose caller gave up waiting: when
// created arrives it deletes the node, and if the reply was lost it looks
// for the node by its protected name, guid, and deletes it if found, at
// each of abandonChecks.
func (s *Client) abandon(created <-chan result[createdNode], dir, guid string) {
	s.bg.Clean(func(ctx context.Context) background.Outcome {
		var r result[createdNode]
		select {
		case r = <-created:
		case <-ctx.Done():
			return background.Cleaned
		}
		switch {
		case r.err == nil:
			for s.remove(ctx, r.v.path) != background.Cleaned {
				if pause(ctx, 1) != nil {
					break
				}
			}
			return background.Cleaned
		case !transient(r.err):
			return background.Cleaned // nothing was created
		}
		for _, wait := range abandonChecks {
			select {
			case <-ctx.Done():
				return background.Cleaned
			case <-time.After(wait):
			}
			if names := s.findOwn(ctx, dir, guid); len(names) > 0 {
				for _, name := range names {
					s.removeLater(dir + "/" + name)
				}
				return background.Cleaned
			}
		}
		return background.Cleaned
	})
}

// removeUnused deletes dir, a container node that this Client created
// for an attempt that failed before it made its node, if it has never had
// a child: the ensemble reaps a container only once it has had one, and
// would keep an unused one for ever.
func (s *Client) removeUnused(dir string) {
	s.bg.Clean(func(ctx context.Context) background.Outcome {
		exists, st, err := s.exists(ctx, dir)
		switch {
		case transient(err) || errors.Is(err, zk.ErrSessionExpired):
			return background.Unreachable
		case err != nil || !exists || st.Cversion != 0 || st.NumChildren != 0:
			return background.Cleaned
		}
		// A delete fails on a node that has children, so a node created
		// since the look is safe.
		if err := s.delete(ctx, dir); transient(err) {
			return background.Unreachable
		}
		return background.Cleaned
	})
}

// findOwn looks, once the ensemble answers, for the nodes under dir whose
// protected name carries guid. It syncs dir first, so that the server
// answering has seen everything the leader committed.
func (s *Client) findOwn(ctx context.Context, dir, guid string) []string {
	for n := 1; ; n++ {
		err := s.sync(ctx, dir)
		var names []string
		if err == nil {
			names, _, err = s.children(ctx, dir)
		}
		switch {
		case err == nil:
			var own []string
			for _, name := range names {
				if ownedBy(name, guid) {
					own = append(own, name)
				}
			}
			return own
		case !transient(err):
			return nil
		}
		if pause(ctx, n) != nil {
			return nil
		}
	}
}

// ownedBy reports whether the node name was created with guid.
func ownedBy(name, guid string) bool {
	p := protectedPrefix + guid + "-"
	return len(name) > len(p) && name[:len(p)] == p
}

// maxParentRestarts bounds how often one create of a lock node makes
// its parents again after one of them went between its creation and the
// creation of its child (in ensureParents, or before the lock node's own
// create): a few round trips each. The reaper takes an empty container
// once a minute at most; a client that deletes empty parents in a loop
// (zklock's own ParentReapedWhileLocking test) won 11 times in a row once,
// on a loaded machine, against an earlier bound of 10.
const maxParentRestarts = 100

// parentsGone is the error of an attempt whose parents went again after
// they were made restarts times: op on path failed with err.
func parentsGone(op, path string, restarts int, err error) error {
	return fmt.Errorf("zklock: %s %s: %w (the lock path's parents were deleted each time they were made, %d times in a row: "+
		"ZooKeeper reaps empty container nodes, and another client may delete empty parents)", op, path, err, restarts)
}

// ensureParents creates dir and its missing ancestors, as container nodes
// where the ensemble has them (ZooKeeper 3.5.3 and later deletes an empty
// container by itself), and as persistent nodes where it does not. It
// reports whether it created dir itself. An ancestor that goes before its
// child is created makes it start again from the top, as long as
// *restarts, which it increments, is below maxParentRestarts.
func (s *Client) ensureParents(ctx context.Context, dir string, restarts *int) (made bool, _ error) {
chain:
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		for n := 1; ; n++ {
			var err error
			if s.noContainers.Load() {
				_, err = call(ctx, s, func(c *zk.Conn) (string, error) { return c.Create(p, nil, zk.FlagPersistent, s.cfg.acl) })
			} else {
				_, err = call(ctx, s, func(c *zk.Conn) (string, error) { return c.CreateContainer(p, nil, zk.FlagContainer, s.cfg.acl) })
				if unimplemented(err) {
					s.noContainers.Store(true)
					continue
				}
			}
			if err == nil || errors.Is(err, zk.ErrNodeExists) {
				made = made || err == nil && p == dir
				break
			}
			if errors.Is(err, zk.ErrNoNode) {
				// An ancestor made or found a moment ago is gone: an empty
				// container that ZooKeeper reaped, or another client's
				// clean-up. Make the chain again from the top.
				if *restarts >= maxParentRestarts {
					return made, parentsGone("creating the parent node "+p+" of", dir, *restarts, err)
				}
				*restarts++
				i = 0
				continue chain
			}
			if ctx.Err() != nil {
				return made, dlock.NotObtained(ctx.Err())
			}
			if !transient(err) {
				return made, describe("creating the parent node", p, err)
			}
			if err := pause(ctx, n); err != nil {
				return made, err
			}
		}
	}
	return made, nil
}

// unimplemented reports whether err is ZooKeeper's "Unimplemented" (code
// -6), which go-zookeeper has no sentinel for: the server predates the
// operation.
func unimplemented(err error) bool {
	return err != nil && err.Error() == "unknown error: -6"
}
