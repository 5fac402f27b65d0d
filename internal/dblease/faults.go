package dblease

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// Attempt timeouts (see AttemptTimeout).
const (
	MinAttemptTimeout = 2 * time.Second
	MaxAttemptTimeout = 5 * time.Second
)

// LockWait is how long an attempt's statements wait for a lock's row
// while another transaction holds it, before the attempt counts the lock
// as held: much longer than a grant in flight holds it, and well below
// MinAttemptTimeout, so that a row held by a long transaction is told from
// a database that does not answer.
const LockWait = time.Second

// AttemptTimeout returns how long an attempt at a lock of TTL ttl waits
// for the database's answer, beyond any wait on the server it asks for:
// the TTL, but at least MinAttemptTimeout and at most MaxAttemptTimeout. A
// grant that came later could not be used (see lease.Fresh), and a
// database that takes that long to answer is as good as unavailable.
func AttemptTimeout(ttl time.Duration) time.Duration {
	return min(max(ttl, MinAttemptTimeout), MaxAttemptTimeout)
}

// NetFault reports whether err, which is not the database's answer to a
// statement, says that the database could not be reached, or that the
// connection to it failed or went silent: refused, reset, closed, timed
// out, or a name that does not resolve for now. A name that does not
// exist, and a TLS handshake or certificate that fails, are not: waiting
// does not heal them.
func NetFault(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return !dns.IsNotFound
	}
	if tlsFailure(err) {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, syscall.EPIPE)
}

// tlsFailure reports whether err is a failed TLS handshake or certificate.
func tlsFailure(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	return errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &op) && op.Op == "remote error" // a TLS alert from the server
}
