package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/renewal"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// closeTimeout bounds the wait for one revoke of a clean-up, and for the
// revoke of an abandoned attempt.
const closeTimeout = 5 * time.Second

// Close waits for the cluster at most closeReleases for the releases, and
// closeWait in all.
const (
	closeReleases = time.Second
	closeWait     = 1500 * time.Millisecond
)

// A Client makes locks on one etcd cluster through the caller's
// clientv3.Client. Each lease it grants is an etcd lease of its own, kept
// alive by one watchdog per Client. It is safe for concurrent use.
type Client struct {
	cli   *clientv3.Client
	obs   dlock.Observer
	reg   lease.Registry
	sched *renewal.Scheduler

	log          *slog.Logger // WithLogger's, or nil
	strictServer bool         // WithStrictServerVersion
	server       serverCheck

	ctx    context.Context // cancelled by Close, with ErrClosed: ends waits
	cancel context.CancelCauseFunc

	bgMu     sync.Mutex
	bg       sync.WaitGroup // background clean-ups (revokes)
	bgClosed bool           // Close waits for bg: later clean-ups are not counted
	bgCtx    context.Context
	bgStop   context.CancelFunc // when Close has waited for the clean-ups long enough
}

// New returns a Client that makes locks through cli. It never fails and
// makes no request: the first error comes from the first Lock or TryLock,
// which also asks the members for their versions (see
// WithStrictServerVersion).
// The caller keeps cli, and closes it after closing the Client.
func New(cli *clientv3.Client, opts ...ClientOption) *Client {
	var cc clientConfig
	for _, o := range opts {
		if o != nil {
			o(&cc)
		}
	}
	c := &Client{cli: cli, obs: lease.Observer(cc.obs, cc.log), log: cc.log, strictServer: cc.strictServer}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.bgCtx, c.bgStop = context.WithCancel(context.Background())
	c.sched = renewal.New(c.renew)
	return c
}

// Close releases every lease the Client still holds (revoking their etcd
// leases), ends the Locks still waiting and the TryLocks under way (their
// errors match ErrClosed and dlock.ErrNotObtained), stops renewing, and
// waits for the clean-ups of failed and abandoned attempts. It waits for
// the cluster at most a second for the releases, and a second and a half
// in all, so that a Client closed while the cluster does not answer
// closes in that time; an etcd lease it could not revoke expires on the
// server one TTL after its last renewal. Every held lease ends with
// dlock.ErrReleased or, if its release failed, dlock.ErrLost wrapping
// ErrClosed; Close returns the errors of the releases that did not
// complete. A lease that Close finds lost (its key deleted, its etcd lease
// gone) is not such an error: its Done and Err report the loss. It does
// not close the clientv3.Client.
func (c *Client) Close() error {
	if c.reg.Closed() {
		return nil
	}
	start := time.Now()
	c.cancel(ErrClosed)
	defer c.bgStop()
	ok, err := c.reg.Close(closeReleases, ErrClosed)
	if !ok {
		return nil
	}
	c.sched.Close()
	c.bgMu.Lock()
	c.bgClosed = true
	c.bgMu.Unlock()
	done := make(chan struct{})
	go func() { c.bg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait - time.Since(start)):
		err = errors.Join(err, fmt.Errorf("etcdlock: Close: clean-ups still running after %v; their etcd leases expire on the server one TTL after their last renewal", closeWait))
	}
	return err
}

// revokeLater revokes the etcd lease id in the background, for Close to
// wait for: the clean-up of an attempt that failed, or of a lease that
// ended without a release.
func (c *Client) revokeLater(id clientv3.LeaseID) {
	c.background(func() {
		ctx, cancel := context.WithTimeout(c.bgCtx, closeTimeout)
		defer cancel()
		c.cli.Revoke(ctx, id) // a lease it cannot revoke expires by its TTL
	})
}

// background runs f on a goroutine of its own, for Close to wait for.
// Once Close has stopped counting them, nothing waits for f.
func (c *Client) background(f func()) {
	c.bgMu.Lock()
	defer c.bgMu.Unlock()
	if c.bgClosed {
		go f()
		return
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f()
	}()
}

// renew is the watchdog's RenewFunc: it confirms each grant of the batch
// in parallel.
func (c *Client) renew(ctx context.Context, batch []*renewal.Entry) []time.Time {
	next := make([]time.Time, len(batch))
	var wg sync.WaitGroup
	for i, e := range batch {
		wg.Go(func() { next[i] = e.Value.(*grant).confirm(ctx) })
	}
	wg.Wait()
	return next
}
