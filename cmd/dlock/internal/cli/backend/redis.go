package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

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
func pingAll(ctx context.Context, rdbs []*redis.Client, quorum int, grace time.Duration) []error {
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
	for i, rdb := range rdbs {
		switch {
		case !answered[i]:
			errs = append(errs, fmt.Errorf("redis %s: no answer within %v", rdb.Options().Addr, grace))
		case found[i] != nil:
			errs = append(errs, fmt.Errorf("redis %s: %w", rdb.Options().Addr, found[i]))
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
