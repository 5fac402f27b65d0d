package main_test

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// dlock authenticates to ZooKeeper with --zk-auth-file (issue 33): the
// nodes of its locks are then its user's alone, so a client without the
// credentials can neither delete a holder's node nor read it; without the
// flag they were open to anyone. inspect and release --force take the
// flag too, and refuse, exit 64, to touch the lock without it.
func TestIntegrationZooKeeperDigestAuth(t *testing.T) {
	t.Parallel()
	srv := sharedZooKeeper(t)
	auth := filepath.Join(t.TempDir(), "zk-auth")
	if err := os.WriteFile(auth, []byte("app:S3cretPW-zk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := deployment{flags: []string{"--zk", srv.Addr(), "--zk-auth-file", auth}}
	name := "/" + lockName(t) + "/job" // a path of its own: its parents get the user's ACL too
	holder := holdInBackground(t, d, name)
	stranger, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, _, err := stranger.Children(name); err != zk.ErrNoAuth {
		t.Errorf("a client without credentials listing %s: %v; want %v", name, err, zk.ErrNoAuth)
	}
	user, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	if err := user.AddAuth("digest", []byte("app:S3cretPW-zk")); err != nil {
		t.Fatal(err)
	}
	children, _, err := user.Children(name)
	if err != nil || len(children) != 1 {
		t.Fatalf("the holder's node under %s: %v, %v", name, children, err)
	}
	node := name + "/" + children[0]
	acl, _, err := user.GetACL(node)
	t.Logf("ACL of the holder's node: %+v (%v)", acl, err)
	if err := stranger.Delete(node, -1); err != zk.ErrNoAuth {
		t.Errorf("a client without credentials deleting the holder's node: %v; want %v", err, zk.ErrNoAuth)
	}
	if r := dlock(t, nil, "inspect", "--zk", srv.Addr(), "--zk-auth-file", auth, name); r.code != 0 || !strings.Contains(r.stdout, "holder") {
		t.Errorf("inspect with --zk-auth-file: exit %d, %q %q; want the holder", r.code, r.stdout, r.stderr)
	}
	if r := dlock(t, nil, "release", "--force", "--yes", "--zk", srv.Addr(), name); r.code != 64 || !strings.Contains(r.stderr, "--zk-auth-file") {
		t.Errorf("release --force without --zk-auth-file: exit %d, %q; want 64 naming --zk-auth-file", r.code, r.stderr)
	}
	if r := dlock(t, nil, "release", "--force", "--yes", "--zk", srv.Addr(), "--zk-auth-file", auth, name); r.code != 0 {
		t.Errorf("release --force with --zk-auth-file: exit %d, %q; want 0", r.code, r.stderr)
	}
	gone := holder.wait(t, 30*time.Second)
	t.Logf("the holder exited %d after the forced release", gone.code)
	// A lock path that a client without credentials made first, open to
	// all, would let it delete the holder's node: refused, naming it.
	open := "/" + lockName(t) + "-open/job"
	for _, p := range []string{path.Dir(open), open} {
		if _, err := stranger.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	r := dlock(t, nil, append(runArgs(d), open, "--", "true")...)
	t.Logf("under a path open to all: exit %d, %s", r.code, r.stderr)
	if r.code != 64 || !strings.Contains(r.stderr, open) {
		t.Errorf("run under a path open to all: exit %d, %q; want 64 naming %s", r.code, r.stderr, open)
	}
	for _, c := range []struct {
		content, want string
	}{{"no-colon\n", "user:password"}, {"\n", "user:password"}} {
		bad := filepath.Join(t.TempDir(), "bad")
		if err := os.WriteFile(bad, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if r := dlock(t, nil, "inspect", "--zk", srv.Addr(), "--zk-auth-file", bad, name); r.code != 64 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("--zk-auth-file holding %q: exit %d, %q; want 64 naming %q", c.content, r.code, r.stderr, c.want)
		}
	}
}

// dlock authenticates to etcd as --etcd-user with the password of
// --password-file or DLOCK_ETCD_PASSWORD (issue 33). On a cluster with
// authentication on, a user whose role may write the lock's prefix runs
// and inspects it; no user, or a wrong password, is exit 64 naming the
// flags.
func TestIntegrationEtcdAuth(t *testing.T) {
	t.Parallel()
	srv := testenv.StartEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	const secret = "S3cretPW-etcd"
	steps := []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "locker"); return err },
		func() error {
			_, err := cli.RoleGrantPermission(ctx, "locker", "locks/", clientv3.GetPrefixRangeEnd("locks/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "app", secret); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "app", "locker"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("setting up authentication, step %d: %v", i, err)
		}
	}
	dir := t.TempDir()
	good, wrong := filepath.Join(dir, "good"), filepath.Join(dir, "wrong")
	if err := os.WriteFile(good, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrong, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := "locks/" + lockName(t)
	as := []string{"--etcd", srv.Addr(), "--etcd-user", "app", "--password-file", good}
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{nil, append(append([]string{"run"}, as...), name, "--", "true")},
		{nil, append(append([]string{"inspect"}, as...), name)},
		{[]string{"DLOCK_ETCD=" + srv.Addr(), "DLOCK_ETCD_USER=app", "DLOCK_ETCD_PASSWORD=" + secret}, []string{"run", name, "--", "sh", "-c", `echo "[$DLOCK_ETCD_USER$DLOCK_ETCD_PASSWORD]"`}},
	} {
		r := dlock(t, c.env, c.args...)
		if r.code != 0 || strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("dlock %q as app: exit %d, stdout %q, stderr %q; want 0, no password", c.args, r.code, r.stdout, r.stderr)
		}
		if c.env != nil && strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("COMMAND sees %q; want no DLOCK_ETCD_USER nor DLOCK_ETCD_PASSWORD", r.stdout)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--etcd", srv.Addr(), name, "--", "true"}, "--etcd-user"},
		{[]string{"run", "--etcd", srv.Addr(), "--etcd-user", "app", "--password-file", wrong, name, "--", "true"}, "--password-file"},
		{[]string{"run", "--etcd", srv.Addr(), "--etcd-user", "app", name, "--", "true"}, "--password-file"},
		{[]string{"run", "--etcd", srv.Addr(), "--etcd-user", "app", "--password-file", good, "other/" + lockName(t), "--", "true"}, "permission"},
	} {
		r := dlock(t, nil, c.args...)
		if r.code != 64 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, secret) {
			t.Errorf("dlock %q: exit %d, %q; want 64 naming %s", c.args, r.code, r.stderr, c.want)
		}
	}
}
