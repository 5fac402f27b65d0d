package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
)

// The first etcd release of each line that ignores lease revokes from a
// leader whose raft loop stalled and that has lost its leadership
// (etcd-io/etcd#15247, fixed by etcd-io/etcd#16822): 3.4.31, 3.5.13, and
// every 3.6. A leader frozen whole is not covered (see the package doc).
var fixedServer = map[int]int{4: 31, 5: 13}

// MinServerVersions names the etcd releases that etcdlock needs for every
// guarantee of its package doc: 3.4.31, 3.5.13 or 3.6.0, or later in the
// same line.
const MinServerVersions = "3.4.31, 3.5.13 or 3.6.0"

// serverCheck is the Client's one look at the servers' versions, made at
// its first Lock or TryLock.
type serverCheck struct {
	mu      sync.Mutex
	done    bool  // a version was read from an endpoint
	running bool  // a background check is under way
	err     error // WithStrictServerVersion's refusal
}

// checkServer asks every endpoint of the client for its version, once per
// Client, at the first attempt to lock: a member older than
// MinServerVersions is logged at Warn (through WithLogger's logger, or
// slog.Default()). Under WithStrictServerVersion the attempt waits for the
// answer and fails if a member is older; otherwise the check runs in the
// background, never fails an attempt, and is made again at the next
// attempt if it reached no endpoint.
func (lk *locker) checkServer(ctx context.Context, cl *call) error {
	c := lk.c
	c.server.mu.Lock()
	done, running, err := c.server.done, c.server.running, c.server.err
	if !done && !running && !c.strictServer {
		c.server.running = true
	}
	c.server.mu.Unlock()
	switch {
	case done:
		return err
	case !c.strictServer && running:
		return nil
	case !c.strictServer:
		c.background(func() {
			ctx, cancel := context.WithTimeout(c.ctx, closeTimeout)
			defer cancel()
			err := c.versions(ctx)
			c.server.mu.Lock()
			c.server.running = false
			c.server.done = c.server.done || (err != nil && !transient(err)) // refused: give up
			c.server.mu.Unlock()
		})
		return nil
	}
	if err := lk.retry(ctx, cl, c.versions); err != nil {
		return failed(ctx, "checking the etcd version for", lk.name, err)
	}
	c.server.mu.Lock()
	defer c.server.mu.Unlock()
	return c.server.err
}

// versions asks every endpoint for its version at once, and records the
// outcome if one answered; it returns an error if none did.
func (c *Client) versions(ctx context.Context) error {
	eps := c.cli.Endpoints()
	vs := make([]string, len(eps))
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			st, err := c.cli.Status(ctx, ep)
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", ep, err)
				return
			}
			vs[i] = st.Version
		})
	}
	wg.Wait()
	old, oldAt, answered := "", "", false
	for i, v := range vs {
		if errs[i] != nil {
			continue
		}
		answered = true
		if old == "" && !serverFixed(v) {
			old, oldAt = v, eps[i]
		}
	}
	if !answered {
		return errors.Join(errs...)
	}
	c.server.mu.Lock()
	defer c.server.mu.Unlock()
	if c.server.done {
		return nil
	}
	c.server.done = true
	if old == "" {
		return nil
	}
	log := c.log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("etcdlock: etcd "+old+" is older than "+MinServerVersions+
		": a leader that stalls (a slow disk, a starved CPU) and comes back can revoke leases"+
		" that the new leader keeps alive, which deletes a held lock's key before its Until (etcd-io/etcd#15247)",
		slog.String("endpoint", oldAt), slog.String("version", old))
	if c.strictServer {
		c.server.err = fmt.Errorf("etcdlock: etcd %s at %s is older than %s, which WithStrictServerVersion requires", old, oldAt, MinServerVersions)
	}
	return nil
}

// serverFixed reports whether the etcd version v (such as "3.5.13") is
// MinServerVersions or later. A version it cannot read is not.
func serverFixed(v string) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 3 {
		return false
	}
	var n [3]int
	for i, p := range parts {
		if i == 2 { // "13-rc.0", "13+git"
			p, _, _ = strings.Cut(p, "-")
			p, _, _ = strings.Cut(p, "+")
		}
		x, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		n[i] = x
	}
	switch {
	case n[0] != 3:
		return n[0] > 3
	case n[1] >= 6:
		return true
	}
	patch, ok := fixedServer[n[1]]
	return ok && n[2] >= patch
}
