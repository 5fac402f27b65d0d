package redislock_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
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
