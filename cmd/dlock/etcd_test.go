package main_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func etcdDeployment(t testing.TB) deployment {
	srv := sharedEtcdServer(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	prefix := func(name string) string { return name + "/" } // the command's name is etcdlock's
	d := deployment{flags: []string{"--etcd", srv.Addr()}}
	d.held = func(t testing.TB, name string) bool {
		resp, err := cli.Get(context.Background(), prefix(name), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatalf("counting the lock's keys: %v", err)
		}
		return resp.Count > 0
	}
	d.sabotage = func(t testing.TB, name string) {
		if _, err := cli.Delete(context.Background(), prefix(name), clientv3.WithPrefix()); err != nil {
			t.Fatalf("deleting the lock's keys: %v", err)
		}
	}
	return d
}

// dlock run, inspect and release --force on etcd pass what they pass on
// the other backends.
func TestIntegrationEtcd(t *testing.T) {
	t.Parallel()
	runSuite(t, etcdDeployment(t))
}

func TestIntegrationBenchEtcd(t *testing.T) {
	t.Parallel()
	benchSuite(t, etcdDeployment(t), "etcd", 1)
}

func TestIntegrationEtcdKindsAndRefusals(t *testing.T) {
	t.Parallel()
	d := etcdDeployment(t)
	t.Run("LibrarySharesNames", func(t *testing.T) {
		// The README's library example and the command name one lock.
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{d.flags[1]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		for _, name := range []string{"locks/" + lockName(t), "/locks/" + lockName(t)} {
			lease, err := etcdlock.New(cli).NewMutex(name).TryLock(context.Background())
			if err != nil {
				t.Fatalf("etcdlock TryLock(%q): %v", name, err)
			}
			if r := dlock(t, nil, runArgs(d, name, "--", "true")...); r.code != 75 {
				t.Errorf("dlock run %q while etcdlock holds it: exit %d, %q; want 75", name, r.code, r.stderr)
			}
			if r := dlock(t, nil, "inspect", "--etcd", d.flags[1], name); r.code != 0 || !strings.Contains(r.stdout, "path     "+name+"/") || strings.Contains(r.stdout, "held     no") {
				t.Errorf("dlock inspect %q while etcdlock holds it: exit %d, %q, %q; want it held, at path %s/", name, r.code, r.stdout, r.stderr, name)
			}
			if err := lease.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("TLSOnPlainPort", func(t *testing.T) {
		// TLS flags against a plain-text port name the TLS handshake, at
		// once (before issue 32: "etcd ... does not answer: context
		// deadline exceeded", after 5s).
		certs := testenv.NewCerts(t)
		r := dlock(t, nil, "run", "--etcd", d.flags[1], "--tls-ca", certs.CA, lockName(t), "--", "true")
		t.Logf("measured: exit %d after %v: %s", r.code, r.took.Round(time.Millisecond), strings.TrimSpace(r.stderr))
		if r.code != 69 || !strings.Contains(r.stderr, "TLS handshake") || r.took > 3*time.Second {
			t.Errorf("TLS flags on a plain etcd: exit %d after %v, %q; want 69 within 3s, naming the TLS handshake", r.code, r.took, r.stderr)
		}
	})
	t.Run("PermitsDisagree", func(t *testing.T) {
		name := lockName(t)
		holder := holdInBackground(t, d, name, "--kind", "semaphore", "--permits", "2")
		r := dlock(t, nil, runArgs(d, "--kind", "semaphore", "--permits", "3", name, "--", "true")...)
		if r.code != 64 || !strings.Contains(r.stderr, "--permits 3") || !strings.Contains(r.stderr, "has 2 permits") {
			t.Errorf("--permits 3 on a semaphore of 2: exit %d, %q; want 64 naming both sizes", r.code, r.stderr)
		}
		if r := dlock(t, nil, runArgs(d, "--kind", "semaphore", "--permits", "2", name, "--", "true")...); r.code != 0 {
			t.Errorf("--permits 2 on a semaphore of 2 with one holder: exit %d, %q", r.code, r.stderr)
		}
		holder.signal(t, syscall.SIGINT)
		holder.wait(t, 10*time.Second)
	})
	t.Run("ReadersShare", func(t *testing.T) {
		name := lockName(t)
		holder := holdInBackground(t, d, name, "--kind", "read")
		if r := dlock(t, nil, runArgs(d, "--kind", "read", name, "--", "true")...); r.code != 0 {
			t.Errorf("a second reader: exit %d, %q", r.code, r.stderr)
		}
		if r := dlock(t, nil, runArgs(d, "--kind", "write", name, "--", "true")...); r.code != 75 {
			t.Errorf("a writer while a reader holds: exit %d, %q; want 75", r.code, r.stderr)
		}
		holder.signal(t, syscall.SIGINT)
		holder.wait(t, 10*time.Second)
	})
	t.Run("Refusals", func(t *testing.T) {
		for _, args := range [][]string{
			{"run", "--etcd", "127.0.0.1", "x", "--", "true"},
			{"run", "--etcd", "http://127.0.0.1:2379", "x", "--", "true"},
			{"run", "--etcd", "127.0.0.1:0", "x", "--", "true"},
			{"run", "--etcd", "127.0.0.1:2379,", "x", "--", "true"},
			{"run", "--etcd", d.flags[1], "--zk", "127.0.0.1:2181", "x", "--", "true"},
			{"run", "--etcd", d.flags[1], "x/", "--", "true"},
			{"inspect", "--etcd", d.flags[1], "/"},
		} {
			if r := dlock(t, nil, args...); r.code != 64 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("dlock %v: exit %d, %q; want 64 on one line", args, r.code, r.stderr)
			}
		}
		// DLOCK_ETCD alone names the service, and COMMAND does not see it.
		r := dlock(t, []string{"DLOCK_ETCD=" + d.flags[1]}, "run", "env-"+lockName(t), "--", "sh", "-c", `echo "[$DLOCK_ETCD]"`)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("DLOCK_ETCD: exit %d, stdout %q, stderr %q; want 0 and COMMAND without it", r.code, r.stdout, r.stderr)
		}
		// A cluster that does not answer is exit 69.
		port, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		// A refusing port fails at once, saying so (the etcd client
		// retried it until its 5s timeout, then said "does not answer").
		if r := dlock(t, nil, "run", "--etcd", "127.0.0.1:"+strconv.Itoa(port), "x", "--", "true"); r.code != 69 || !strings.Contains(r.stderr, "no etcd server accepts connections") || r.took > 3*time.Second {
			t.Errorf("an etcd that is not there: exit %d after %v, %q; want 69 within 3s, naming the refusal", r.code, r.took, r.stderr)
		}
	})
}

// The etcd client's own warnings (a server older than etcdlock needs:
// Debian's 3.4.23 here) reach stderr with -v only: without it, stderr holds
// only what the command says.
func TestIntegrationEtcdServerWarningWithVerbose(t *testing.T) {
	t.Parallel()
	d := etcdDeployment(t)
	name := lockName(t)
	quiet := dlock(t, nil, runArgs(d, name, "--", "true")...)
	if quiet.code != 0 || quiet.stderr != "" {
		t.Errorf("run without -v: exit %d, stderr %q; want 0 and nothing", quiet.code, quiet.stderr)
	}
	verbose := dlock(t, nil, runArgs(d, "-v", name, "--", "true")...)
	if verbose.code != 0 || !strings.Contains(verbose.stderr, "older than "+etcdlock.MinServerVersions) {
		t.Errorf("run -v: exit %d, stderr %q; want 0 and the server's version warning", verbose.code, verbose.stderr)
	}
}
