package main_test

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// --tls-server-name names the certificate an etcd server must show when
// it is not the endpoint's host (issue 33: grpc replaced it with the
// endpoint's host, so a server reached by its address failed, after 5s,
// as "does not answer"). The server's certificate names only
// testenv.CertName, and dlock reaches it at 127.0.0.1.
func TestIntegrationEtcdTLSServerName(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	srv := testenv.StartEtcdTLS(t, certs.NamedCert, certs.NamedKey)
	tls := []string{"--etcd", srv.TLSAddr(), "--tls-ca", certs.CA}
	named := append(tls, "--tls-server-name", testenv.CertName)
	name := lockName(t)
	for _, args := range [][]string{
		append(append([]string{"run"}, named...), name, "--", "true"),
		append(append([]string{"inspect"}, named...), name),
	} {
		if r := dlock(t, nil, args...); r.code != 0 {
			t.Errorf("dlock %s with --tls-server-name %s: exit %d after %v, %q; want 0", args[0], testenv.CertName, r.code, r.took, r.stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(append([]string{"inspect"}, tls...), name), "127.0.0.1"},
		{append(append([]string{"inspect"}, tls...), "--tls-server-name", "other.dlock.test", name), "other.dlock.test"},
	} {
		if r := dlock(t, nil, c.args...); r.code != 69 || !strings.Contains(r.stderr, "certificate") || !strings.Contains(r.stderr, c.want) {
			t.Errorf("dlock %q: exit %d, %q; want 69, the certificate refused for %s", c.args, r.code, r.stderr, c.want)
		}
	}
}
