package zklock_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// tlsFailWithin bounds New against a server whose handshake fails: ctx
// of tlsFailCtx, plus New's clean-up.
const (
	tlsFailCtx    = 3 * time.Second
	tlsFailWithin = tlsFailCtx + 2*time.Second
)

// tlsConfig trusts certs' CA and, if withClientCert, presents its client
// certificate.
func tlsConfig(t *testing.T, certs *testenv.Certs, withClientCert bool) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", certs.CA)
	}
	cfg := &tls.Config{RootCAs: pool}
	if withClientCert {
		cert, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// With the right CA and a client certificate, a Client on the secure
// client port locks, fences and unlocks as on the plain port.
func TestIntegrationTLS(t *testing.T) {
	certs := testenv.NewCerts(t)
	z := testenv.StartZooKeeperTLS(t, certs, true)
	ctx := ctxFor(t, time.Minute)
	c := connect(t, []string{z.TLSAddr()}, zklock.WithTLS(tlsConfig(t, certs, true)))
	path := uniquePath(t)
	first, err := c.NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock over TLS: %v", err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release over TLS: %v", err)
	}
	second, err := c.NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatalf("second Lock over TLS: %v", err)
	}
	if second.Fence() <= first.Fence() {
		t.Errorf("second fence %d not after the first's %d", second.Fence(), first.Fence())
	}
	if err := second.Release(ctx); err != nil {
		t.Fatalf("second Release over TLS: %v", err)
	}
}

// Digest credentials work over TLS, and nodes made with them are the
// authenticated user's only.
func TestIntegrationTLSDigestAuth(t *testing.T) {
	certs := testenv.NewCerts(t)
	z := testenv.StartZooKeeperTLS(t, certs, false)
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	owner := connect(t, []string{z.TLSAddr()}, zklock.WithTLS(tlsConfig(t, certs, false)), zklock.WithDigestAuth("app", "s3cret"))
	lease, err := owner.NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock with digest auth over TLS: %v", err)
	}
	defer lease.Release(ctx)
	got, _, err := owner.Conn().GetACL(path)
	if err != nil || len(got) != 1 || got[0].Scheme != "digest" || !strings.HasPrefix(got[0].ID, "app:") {
		t.Fatalf("ACL of the lock path = %v, %v; want app's digest ACL", got, err)
	}
	stranger := connect(t, []string{z.TLSAddr()}, zklock.WithTLS(tlsConfig(t, certs, false)))
	if _, _, err := stranger.Conn().Children(path); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("an unauthenticated session listing %s over TLS: %v; want zk.ErrNoAuth", path, err)
	}
}

// A handshake that fails ends New with ctx, in bounded time, with an
// error that names the server and says what was wrong with TLS.
func TestIntegrationTLSRefused(t *testing.T) {
	certs := testenv.NewCerts(t)
	other := testenv.NewCerts(t) // a CA the server's certificate is not from
	z := testenv.StartZooKeeperTLS(t, certs, true)

	wrongName := tlsConfig(t, certs, true)
	wrongName.ServerName = "zk.example.com"
	tests := []struct {
		name string
		addr string
		cfg  *tls.Config
		want []string // every one must be in the error
	}{
		{"wrong CA", z.TLSAddr(), tlsConfig(t, other, true), []string{"TLS handshake with " + z.TLSAddr(), "certificate signed by unknown authority"}},
		{"wrong server name", z.TLSAddr(), wrongName, []string{"TLS handshake with " + z.TLSAddr(), "not zk.example.com"}},
		// The server says so in the handshake under TLS 1.2, and in the
		// first read after it under TLS 1.3.
		{"no client certificate", z.TLSAddr(), tlsConfig(t, certs, false), []string{z.TLSAddr(), "tls: ", "certificate"}},
		{"plain port", z.Addr(), tlsConfig(t, certs, true), []string{"TLS handshake with " + z.Addr(), "is that its secure client port?"}},
	}
	// The handshakes fail side by side, each New with a ctx of its own
	// that it waits out: one after the other, they took tlsFailCtx each.
	type outcome struct {
		took        time.Duration
		err, ctxErr error
	}
	outcomes := make([]chan outcome, len(tests))
	for i, tt := range tests {
		outcomes[i] = make(chan outcome, 1)
		ctx := ctxFor(t, tlsFailCtx)
		go func() {
			start := time.Now()
			c, err := zklock.New(ctx, []string{tt.addr}, zklock.WithTLS(tt.cfg))
			took := time.Since(start)
			if err == nil {
				c.Close()
			}
			outcomes[i] <- outcome{took, err, ctx.Err()}
		}()
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := <-outcomes[i]
			took, err := o.took, o.err
			if err == nil {
				t.Fatalf("New succeeded; want a TLS error")
			}
			t.Logf("New after %v: %v", took.Round(time.Millisecond), err)
			if took > tlsFailWithin {
				t.Errorf("New took %v; want at most %v", took, tlsFailWithin)
			}
			if !errors.Is(err, o.ctxErr) {
				t.Errorf("error %v does not match ctx.Err() %v", err, o.ctxErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// A server that accepts the connection and never answers the handshake
// (here, paused) does not hold New past ctx: closing the connection cuts
// the handshake short, though it may last the session timeout. New's
// error says the handshake was under way.
func TestIntegrationTLSSilentServer(t *testing.T) {
	certs := testenv.NewCerts(t)
	z := testenv.StartZooKeeperTLS(t, certs, true)
	if err := z.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { z.Resume() })
	ctx := ctxFor(t, time.Second)
	start := time.Now()
	c, err := zklock.New(ctx, []string{z.TLSAddr()}, zklock.WithTLS(tlsConfig(t, certs, true)),
		zklock.WithSessionTimeout(30*time.Second))
	took := time.Since(start)
	if err == nil {
		c.Close()
		t.Fatal("New succeeded with a paused server")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "TLS handshake with "+z.TLSAddr()+" under way for ") {
		t.Errorf("New = %v; want DeadlineExceeded, saying that the TLS handshake with %s was under way", err, z.TLSAddr())
	}
	if took > 3*time.Second {
		t.Errorf("New took %v with a 1s ctx; the handshake held it", took)
	}
}
