package backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Permanent tells a failure to connect that a wait may heal from one it
// cannot: the command waits through the first (issue 32) and reports the
// second at once.
func TestPermanent(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", fmt.Errorf("redis 127.0.0.1:1: %w", refused), false},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), false},
		{"no answer", fmt.Errorf("postgres h:5432/db does not answer within 5s: %w", context.DeadlineExceeded), false},
		{"no quorum", errors.New("only 1 of 3 Redis masters answer; Redlock needs a majority: ..."), false},
		{"handshake not finished", errors.New("TLS handshake with h:6380 did not complete within 2s: does the server speak TLS on that port? (rediss:// is Redis over TLS, redis:// plain TCP): context deadline exceeded"), false},
		{"starting up", errors.New("FATAL: the database system is starting up (SQLSTATE 57P03)"), false},
		{"usage", cmdutil.Usagef("password authentication failed for user \"app\" (SQLSTATE 28P01); check ..."), true},
		{"wrapped usage", fmt.Errorf("connecting: %w", cmdutil.Usagef("NOAUTH")), true},
		{"unknown CA", fmt.Errorf("TLS handshake with h:2379: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), true},
		{"plain port", fmt.Errorf("TLS handshake failed: %w", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), true},
		{"alert", fmt.Errorf("remote error: %w", tls.AlertError(42)), true},
		{"text only", errors.New("zklock: no session with [h:2281]: context deadline exceeded (state StateConnecting; last error: tls: failed to verify certificate: x509: certificate signed by unknown authority)"), true},
		{"etcd plain port", errors.New("no etcd server completes a TLS handshake: TLS handshake with h:2379: EOF (is that port plain text? drop the TLS flags, or give the server's TLS port)"), true},
		{"nil", nil, false},
	} {
		if got := Permanent(tc.err); got != tc.want {
			t.Errorf("%s: Permanent(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestSpecDescribe(t *testing.T) {
	pg, err := pgxpool.ParseConfig("postgres://app:pw@db:5433/app")
	if err != nil {
		t.Fatal(err)
	}
	my, err := mysql.ParseDSN("app:pw@tcp(db:3306)/app")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Redis: []*redis.Options{{Addr: "a:6379"}}}, "redis a:6379"},
		{Spec{Redis: []*redis.Options{{Addr: "a:1"}, {Addr: "b:2"}, {Addr: "c:3"}}}, "redlock a:1,b:2,c:3"},
		{Spec{ZK: []string{"a:2181", "b:2181"}}, "zookeeper a:2181,b:2181"},
		{Spec{Etcd: []string{"a:2379"}}, "etcd a:2379"},
		{Spec{Postgres: pg}, "postgres db:5433/app"},
		{Spec{MySQL: my}, "mysql db:3306/app"},
	} {
		if got := tc.spec.Describe(); got != tc.want {
			t.Errorf("Describe() = %q; want %q", got, tc.want)
		}
	}
}
