package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// The command reaches a Redis that requires TLS with client certificates:
// the right CA and certificate work; a wrong CA, a wrong server name or no
// client certificate fail closed with a message that says so; TLS flags
// with a plain redis:// URL are a usage error; skip_verify=true is warned
// about.
func TestIntegrationRedisTLS(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	testenv.StartRedis(t, testenv.RedisConfig{Args: certs.RedisTLSArgs(port)})
	url := fmt.Sprintf("rediss://127.0.0.1:%d", port)
	client := []string{"--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey}
	other := testenv.NewCerts(t)
	inspect := func(env []string, args ...string) result {
		return dlock(t, env, append(append([]string{"inspect"}, args...), "tls-lock")...)
	}
	if r := inspect(nil, append([]string{"--redis", url, "--tls-ca", certs.CA}, client...)...); r.code != 0 {
		t.Errorf("right CA and client certificate: exit %d, %s", r.code, r.stderr)
	}
	env := []string{"DLOCK_REDIS=" + url, "DLOCK_TLS_CA=" + certs.CA, "DLOCK_TLS_CERT=" + certs.ClientCert, "DLOCK_TLS_KEY=" + certs.ClientKey}
	if r := inspect(env); r.code != 0 {
		t.Errorf("the same through DLOCK_TLS_*: exit %d, %s", r.code, r.stderr)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong CA", append([]string{"--redis", url, "--tls-ca", other.CA}, client...), "certificate"},
		{"wrong name", append([]string{"--redis", url, "--tls-ca", certs.CA, "--tls-server-name", "elsewhere.example"}, client...), "certificate"},
		{"no client certificate", []string{"--redis", url, "--tls-ca", certs.CA}, "certificate"},
	} {
		if r := inspect(nil, tc.args...); r.code != 69 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, %q; want 69 and a message about the %s", tc.name, r.code, r.stderr, tc.want)
		}
	}
	if r := inspect(nil, "--redis", fmt.Sprintf("redis://127.0.0.1:%d", port), "--tls-ca", certs.CA); r.code != 64 || !strings.Contains(r.stderr, "rediss://") {
		t.Errorf("TLS flags with redis://: exit %d, %q; want 64 naming rediss://", r.code, r.stderr)
	}
	if r := inspect(nil, append([]string{"--redis", url + "?skip_verify=true"}, client...)...); !strings.Contains(r.stderr, "WARNING") || !strings.Contains(r.stderr, "skip_verify") {
		t.Errorf("skip_verify=true: exit %d, stderr %q; want a warning", r.code, r.stderr)
	}
}

// The command reaches ZooKeeper's secure client port when given the TLS
// flags: the right CA and client certificate run COMMAND under the lock
// and inspect it; a wrong CA or no client certificate fails closed, exit
// 69, with a message about the certificate.
func TestIntegrationZooKeeperTLS(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	zk := testenv.StartZooKeeperTLS(t, certs, true)
	client := []string{"--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey}
	right := append([]string{"--zk", zk.TLSAddr(), "--tls-ca", certs.CA}, client...)
	// --wait: a loaded machine may take more than the default connect
	// time to finish ZooKeeper's TLS handshake and session.
	if r := dlock(t, nil, append(append([]string{"run", "--wait", "30s"}, right...), "zk-tls", "--", "true")...); r.code != 0 {
		t.Fatalf("run with the right CA and client certificate: exit %d, %s", r.code, r.stderr)
	}
	if r := dlock(t, nil, append(append([]string{"inspect"}, right...), "zk-tls")...); r.code != 0 || !strings.Contains(r.stdout, "free") {
		t.Errorf("inspect over TLS: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
	other := testenv.NewCerts(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"wrong CA", append([]string{"--zk", zk.TLSAddr(), "--tls-ca", other.CA}, client...)},
		{"no client certificate", []string{"--zk", zk.TLSAddr(), "--tls-ca", certs.CA}},
	} {
		r := dlock(t, nil, append(append([]string{"inspect"}, tc.args...), "zk-tls")...)
		if r.code != 69 || !strings.Contains(r.stderr, "certificate") {
			t.Errorf("%s: exit %d, %q; want 69 and a message about the certificate", tc.name, r.code, r.stderr)
		}
	}
}

// dlock run reaches a Redis that requires TLS with client certificates and
// a password (an ACL user with the README's least rights) through a
// rediss:// URL carrying the user and password, and runs the command
// under the lock. A wrong password fails before the command runs with exit
// 64 (bad usage, as run's help says: fix the URL) and a message about the
// password; a wrong CA with exit 69 and a message about the certificate.
func TestIntegrationRunRedisTLSPassword(t *testing.T) {
	t.Parallel()
	certs := testenv.NewCerts(t)
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	acl := strings.Fields("on >s3cret resetkeys ~dlock:* resetchannels &dlock:* -@all +@read +@write +eval " +
		"+evalsha +script|load +time +publish +subscribe +unsubscribe +ping +hello +client|setname")
	testenv.StartRedis(t, testenv.RedisConfig{Args: append(append(certs.RedisTLSArgs(port), "--user", "locker"), acl...)})
	client := []string{"--tls-ca", certs.CA, "--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey}
	run := func(url string, tlsArgs []string) result {
		args := append(append([]string{"run", "--redis", url}, tlsArgs...), "tls-run", "--", "sh", "-c", "echo ran under the lock")
		return dlock(t, nil, args...)
	}
	url := fmt.Sprintf("rediss://locker:s3cret@127.0.0.1:%d", port)
	if r := run(url, client); r.code != 0 || !strings.Contains(r.stdout, "ran under the lock") {
		t.Fatalf("run over TLS with the password: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r := run(fmt.Sprintf("rediss://locker:wrong@127.0.0.1:%d", port), client)
	if r.code != 64 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "refused the password") {
		t.Errorf("wrong password: exit %d, stdout %q, stderr %q; want 64, no run, and a message about the password", r.code, r.stdout, r.stderr)
	}
	other := testenv.NewCerts(t)
	r = run(url, []string{"--tls-ca", other.CA, "--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey})
	if r.code != 69 || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "certificate") {
		t.Errorf("wrong CA: exit %d, stdout %q, stderr %q; want 69, no run, and a message about the certificate", r.code, r.stdout, r.stderr)
	}
}
