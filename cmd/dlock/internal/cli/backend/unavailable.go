package backend

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// Describe names the service s describes, for messages, as the command
// was given it: "redis 127.0.0.1:6379", "redlock a:6379,b:6379,c:6379",
// "zookeeper a:2181,b:2181,c:2181", "etcd a:2379", "postgres
// db:5432/app" or "mysql db:3306/app".
func (s Spec) Describe() string {
	d := driverOf(s)
	if d == nil {
		return "no lock service"
	}
	return d.name + " " + d.describe(s)
}

// Nodes returns each server of the service s describes as a Spec of its
// own, as dlock bench measures them.
func (s Spec) Nodes() []Node {
	if d := driverOf(s); d != nil && d.nodes != nil {
		return d.nodes(s)
	}
	return nil
}

// Permanent reports whether err, a failure of Connect, is one that
// connecting again does not heal: a UsageError (a password or a database
// the server refuses, a privilege the account lacks), or a TLS handshake
// that failed on what the server sent (a certificate that does not
// verify, an alert, a port that speaks plain text). Anything else may heal
// while the command waits: a connection refused or reset, a server that
// does not answer (a TLS handshake that does not finish included), one
// starting up or shutting down, an ensemble or a cluster without a quorum,
// too few Redlock masters.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	if cmdutil.IsUsage(err) {
		return true
	}
	var (
		header   tls.RecordHeaderError
		alert    tls.AlertError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	if errors.As(err, &header) || errors.As(err, &alert) || errors.As(err, &verify) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return true
	}
	// Some clients keep only the text of the handshake's error.
	msg := err.Error()
	for _, s := range []string{"x509: ", "tls: ", "is that port plain text?"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
