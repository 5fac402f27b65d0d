package backend

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testenv"
)

// Any TLS flag turns TLS on for ZooKeeper and PostgreSQL: PostgreSQL then
// verifies the certificate and the host name (sslmode=verify-full), with
// no fallback to plain TCP, even when the URL asked for sslmode=disable.
func TestTLSFlagsForZooKeeperAndPostgres(t *testing.T) {
	certs := testenv.NewCerts(t)
	f := Flags{ZK: "127.0.0.1:2281", TLS: TLSFlags{CA: certs.CA}}
	spec, err := f.Resolve(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if spec.ZKTLS == nil || spec.ZKTLS.RootCAs == nil || spec.ZKTLS.InsecureSkipVerify {
		t.Errorf("ZooKeeper with --tls-ca: TLS config %+v; want one verifying with the CA", spec.ZKTLS)
	}
	f = Flags{ZK: "127.0.0.1:2181"}
	if spec, err := f.Resolve(func(string) string { return "" }); err != nil || spec.ZKTLS != nil {
		t.Errorf("ZooKeeper without TLS flags: %+v, %v; want plain TCP", spec.ZKTLS, err)
	}

	for _, mode := range []string{"disable", "prefer", "require"} {
		f = Flags{Postgres: "postgres://u:p@db.internal:5432/app?sslmode=" + mode,
			TLS: TLSFlags{CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey}}
		spec, err := f.Resolve(func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		c := spec.Postgres.ConnConfig
		if c.TLSConfig == nil || c.TLSConfig.InsecureSkipVerify || c.TLSConfig.ServerName != "db.internal" ||
			c.TLSConfig.RootCAs == nil || len(c.TLSConfig.Certificates) != 1 || len(c.Fallbacks) != 0 {
			t.Errorf("PostgreSQL sslmode=%s with the TLS flags: TLS %+v, %d fallbacks; want verify-full with the client certificate and no fallback",
				mode, c.TLSConfig, len(c.Fallbacks))
		}
	}
	f = Flags{Postgres: "postgres://u:p@db.internal:5432/app", TLS: TLSFlags{Cert: certs.ClientCert}}
	if _, err := f.Resolve(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Errorf("--tls-cert without --tls-key: %v; want an error naming --tls-key", err)
	}
}

// A reset or close over TLS without a client certificate is what a server
// that requires one may show a client that writes first: Connect then
// names the flags (TestIntegrationRedisTLS saw a bare "connection reset by
// peer" under load).
func TestResetOverTLSNamesClientCertificate(t *testing.T) {
	withCert := &tls.Config{Certificates: []tls.Certificate{{}}}
	for _, tc := range []struct {
		spec Spec
		want bool
	}{
		{Spec{Redis: []*redis.Options{{TLSConfig: &tls.Config{}}}}, true},
		{Spec{Redis: []*redis.Options{{TLSConfig: withCert}}}, false},
		{Spec{Redis: []*redis.Options{{}}}, false},
		{Spec{ZKTLS: &tls.Config{}}, true},
		{Spec{EtcdTLS: withCert}, false},
	} {
		if got := tlsWithoutClientCert(tc.spec); got != tc.want {
			t.Errorf("tlsWithoutClientCert(%+v) = %v; want %v", tc.spec, got, tc.want)
		}
	}
	if !closedOverTLS(fmt.Errorf("write: %w", syscall.ECONNRESET)) || !closedOverTLS(io.EOF) || closedOverTLS(errors.New("i/o timeout")) {
		t.Error("closedOverTLS: a reset and an EOF are closes; a timeout is not")
	}
}
