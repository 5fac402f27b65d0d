package redislock_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// A server that refuses the client's certificate (none given, or one
// signed by a CA it does not trust) is not unavailable: waiting does not
// change it. Under TLS 1.3 the refusal comes after the client's side of
// the handshake, as an alert in reply to the first command. TryLock and
// Lock fail at once with an error naming it, matching neither
// dlock.ErrUnavailable nor dlock.ErrNotObtained (TryLock matched
// ErrUnavailable, and Lock waited until its context ended).
func TestIntegrationRefusedClientCertificateFailsAtOnce(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	other := testenv.NewCerts(t)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartRedis(t, testenv.RedisConfig{Args: []string{"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey, "--tls-ca-cert-file", certs.CA,
		"--tls-auth-clients", "yes"}})
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	untrusted, err := tls.LoadX509KeyPair(other.ClientCert, other.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want string
	}{
		{"no client certificate", &tls.Config{RootCAs: roots}, "certificate required"},
		{"client certificate of another CA", &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{untrusted}}, "unknown certificate authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), TLSConfig: tc.cfg, ContextTimeoutEnabled: true})
			t.Cleanup(func() { rdb.Close() })
			c := redislock.New(goredisconn.New(rdb))
			t.Cleanup(func() { c.Close() })
			m := c.NewMutex("tls-refused")
			_, err := m.TryLock(context.Background())
			if err == nil || errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("TryLock with a refused client certificate = %v; want an error matching neither ErrUnavailable nor ErrNotObtained", err)
			}
			start := time.Now()
			_, err = m.Lock(timeout(t, 10*time.Second))
			took := time.Since(start)
			t.Logf("measured: Lock with a refused client certificate returned after %v: %v", took.Round(time.Millisecond), err)
			if err == nil || errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrNotObtained) {
				t.Errorf("Lock with a refused client certificate = %v; want an error matching neither ErrUnavailable nor ErrNotObtained", err)
			}
			if err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Lock's error %q does not say %q", err, tc.want)
			}
			if took > time.Second+dlocktest.Slack {
				t.Errorf("Lock with a refused client certificate took %v; want it to fail at once", took)
			}
		})
	}
}

// busy has srv run a script for d on a connection of its own, as another
// application's slow script would, and returns once srv answers other
// clients BUSY (busy-reply-threshold must be set low); the channel gets the
// script's error when it ends.
func busy(t *testing.T, srv *testenv.Redis, d time.Duration) <-chan error {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: d + 10*time.Second})
	t.Cleanup(func() { rdb.Close() })
	done := make(chan error, 1)
	go func() {
		done <- rdb.Eval(context.Background(), `local s = redis.call('TIME')
local t0 = s[1] * 1000000 + s[2]
while true do
  local n = redis.call('TIME')
  if n[1] * 1000000 + n[2] - t0 > tonumber(ARGV[1]) then break end
end
return 1`, nil, d.Microseconds()).Err()
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := srv.Do("PING"); err != nil && strings.Contains(err.Error(), "BUSY") {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never got busy")
		}
	}
}

// A server that answers BUSY (another client's script runs long) cannot
// serve for a while; it has not said that a lease is gone, nor that a
// release or a clean-up has nothing left to do. A renewal it turns away is
// tried again (the lease was lost at once, its key left to expire: "lock
// lost: ... BUSY"); a release it turns away is sent again in the
// background, as its error says (it was dropped, the key left until its
// TTL); and the clean-up of a grant whose reply was lost keeps trying while
// it is turned away (it gave up after its late looks, 4.3s, and the key
// stayed until its TTL).
func TestIntegrationBusyServerIsNotAnAnswer(t *testing.T) {
	t.Parallel()
	d := standalone(t)
	srv := d.servers[0]
	if _, err := srv.Do("CONFIG", "SET", "busy-reply-threshold", "100"); err != nil {
		t.Fatal(err)
	}
	ctx := timeout(t, time.Minute)
	c := newClient(t, d, goRedis)
	t.Run("renewal", func(t *testing.T) {
		l, err := c.NewMutex("busy-renewal", redislock.WithTTL(6*time.Second)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		for until := l.Until(); l.Until() == until; time.Sleep(5 * time.Millisecond) { // just renewed
		}
		if err := <-busy(t, srv, 2500*time.Millisecond); err != nil { // over the next renewal, 2s on
			t.Fatal(err)
		}
		free := time.Now()
		time.Sleep(time.Second) // a renewal after the busy spell
		if err := l.Err(); err != nil {
			t.Fatalf("the lease ended when a renewal met a busy server: %v", err)
		}
		// Renewed before the spell only, it would end 3.4s after it.
		if l.Until().Before(free.Add(4500 * time.Millisecond)) {
			t.Errorf("the lease ends %v after the busy spell; want it renewed once the server was free", l.Until().Sub(free).Round(time.Millisecond))
		}
	})
	gone := func(t *testing.T, what string, ended time.Time) {
		t.Helper()
		for {
			if out, _ := srv.Do("EXISTS", lockKey(what)); out == "0" {
				t.Logf("measured: the key went %v after the server was free", time.Since(ended).Round(time.Millisecond))
				return
			}
			if time.Since(ended) > 3*time.Second {
				pttl, _ := srv.Do("PTTL", lockKey(what))
				t.Fatalf("the key is still there %v after the server was free (PTTL %sms)", time.Since(ended).Round(time.Millisecond), pttl)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Run("release", func(t *testing.T) {
		l, err := c.NewMutex("busy-release").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := busy(t, srv, 1500*time.Millisecond)
		err = l.Release(ctx)
		t.Logf("Release on a busy server: %v", err)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		gone(t, "busy-release", time.Now())
	})
	t.Run("lost grant", func(t *testing.T) {
		p := testenv.StartProxy(t, srv.Addr())
		proxied := *d
		proxied.dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, p.Addr())
		}
		m := newClient(t, &proxied, goRedis).NewMutex("busy-lost-grant")
		if l, err := m.TryLock(ctx); err != nil { // loads the script
			t.Fatal(err)
		} else {
			l.Release(ctx)
		}
		p.SetLatency(900 * time.Millisecond) // the grant lands after 0.9s, its reply after AttemptTimeout
		tried := make(chan error, 1)
		go func() {
			_, err := m.TryLock(ctx)
			tried <- err
		}()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			if out, _ := srv.Do("EXISTS", lockKey("busy-lost-grant")); out == "1" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the grant never landed")
			}
		}
		done := busy(t, srv, 6*time.Second) // longer than the clean-up's late looks
		p.SetLatency(0)
		if err := <-tried; !errors.Is(err, dlock.ErrUnavailable) {
			t.Fatalf("TryLock whose reply came too late = %v; want ErrUnavailable", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		gone(t, "busy-lost-grant", time.Now())
	})
}
