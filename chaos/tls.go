package chaos

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/dlock-go/dlock/internal/servers"
)

// With Options.TLS, the Redis servers serve the clients on a TLS port that
// requires a client certificate, and the clients log in as tlsUser, whose
// ACL is the least the README's Security section gives (Redlock's restart
// detection included); ZooKeeper serves them on its secure client port,
// which requires a client certificate, and the clients authenticate with
// the digest scheme as tlsUser. The harness's own commands (expire, the
// Sentinel and failover checks) use the servers' plain ports.
const (
	tlsUser     = "dlock"
	tlsPassword = "chaos-password"
)

// tlsACL is the ACL rule of tlsUser on Redis: the README's, word for word.
var tlsACL = "on >" + tlsPassword + " resetkeys ~dlock:* resetchannels &dlock:* -@all +@read +@write +eval " +
	"+evalsha +script|load +time +publish +subscribe +unsubscribe +ping +hello +client|setname " +
	"+info +lastsave +config|get"

// TLSBackend reports whether backend can run with Options.TLS.
func TLSBackend(backend string) bool {
	s := serviceOf(backend)
	return s != nil && s.tls
}

// clientTLS is what a client needs to reach the servers through TLS.
type clientTLS struct {
	CA, Cert, Key  string // PEM files
	User, Password string
}

// startTLS writes the deployment's certificates into a new temporary
// directory, which close removes.
func (d *deployment) startTLS() error {
	dir, err := os.MkdirTemp("", "dlock-chaos-certs-")
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	d.certsDir = dir
	d.certs, err = servers.WriteCerts(dir)
	return err
}

// redisTLSArgs returns the arguments that add a TLS port and tlsUser to a
// Redis server, and the port.
func (d *deployment) redisTLSArgs() ([]string, int, error) {
	port, err := servers.FreePort()
	if err != nil {
		return nil, 0, err
	}
	// redis-server joins the words after --user into one config line.
	args := append(d.certs.RedisTLSArgs(port), "--user", tlsUser)
	return append(args, strings.Fields(tlsACL)...), port, nil
}

// clientTLS returns what clients need, or nil without TLS.
func (d *deployment) clientTLS() *clientTLS {
	if d.certs == nil {
		return nil
	}
	return &clientTLS{CA: d.certs.CA, Cert: d.certs.ClientCert, Key: d.certs.ClientKey, User: tlsUser, Password: tlsPassword}
}

// config returns the TLS configuration of a client, which verifies the
// servers' certificate for 127.0.0.1 (the proxies it connects to forward
// bytes untouched).
func (t *clientTLS) config() (*tls.Config, error) {
	ca, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("no certificate in %s", t.CA)
	}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1",
		MinVersion: tls.VersionTLS12}, nil
}
