package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// Bad arguments to New are reported before any network traffic.
func TestConnectBadArguments(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		servers []string
		opts    []zklock.ClientOption
		want    string
	}{
		{"no servers", nil, nil, "no ZooKeeper servers"},
		{"empty address", []string{""}, nil, `server address ""`},
		{"empty port", []string{"127.0.0.1:"}, nil, `port "" is not a number`},
		{"port out of range", []string{"127.0.0.1:70000"}, nil, `port "70000"`},
		{"space in host", []string{"a b:2181"}, nil, "want host:port"},
		{"zero session timeout", []string{"127.0.0.1:2181"}, []zklock.ClientOption{zklock.WithSessionTimeout(0)}, "session timeout 0s must be positive"},
		{"empty ACL", []string{"127.0.0.1:2181"}, []zklock.ClientOption{zklock.WithACL()}, "at least one ACL"},
		{"empty digest user", []string{"127.0.0.1:2181"}, []zklock.ClientOption{zklock.WithDigestAuth("", "pw")}, "must be non-empty"},
		{"colon in digest user", []string{"127.0.0.1:2181"}, []zklock.ClientOption{zklock.WithDigestAuth("a:b", "pw")}, "must not contain ':'"},
		{"nil TLS config", []string{"127.0.0.1:2181"}, []zklock.ClientOption{zklock.WithTLS(nil)}, "WithTLS: the *tls.Config is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := zklock.New(ctx, tt.servers, tt.opts...)
			if err == nil {
				s.Close()
				t.Fatalf("Connect succeeded; want an error mentioning %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

// No ensemble: New gives up when ctx does, naming the servers.
func TestConnectUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := zklock.New(ctx, []string{"127.0.0.1:1"})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("Connect to nothing = %v; want DeadlineExceeded naming the server", err)
	}
}

// Bad lock arguments are reported by the first call, with no node made.
func TestIntegrationBadLockArguments(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	s := connect(t, []string{sharedZK(t).Addr()})
	tests := []struct {
		name string
		l    dlock.Locker
		want string
	}{
		{"empty path", s.NewMutex(""), "lock path \"\" is empty"},
		{"relative path", s.NewMutex("locks/a"), "not absolute"},
		{"root", s.NewMutex("/"), "is the root /, which cannot be a lock"},
		{"trailing slash", s.NewMutex("/locks/a/"), "ends with a slash"},
		{"empty segment", s.NewMutex("/locks//a"), "empty path segment"},
		{"dot segment", s.NewMutex("/locks/./a"), `path segment "."`},
		{"dot-dot segment", s.NewMutex("/locks/../a"), `path segment ".."`},
		{"control character", s.NewMutex("/locks/a\x01b"), "U+0001"},
		{"reserved range", s.NewMutex("/locks/a\uf000"), "U+F000"},
		{"invalid UTF-8", s.NewMutex("/locks/\xff"), "not valid UTF-8"},
		{"under /zookeeper", s.NewMutex("/zookeeper/quota"), "reserves for itself"},
		{"too long", s.NewMutex("/" + strings.Repeat("a", 2000)), "limit is 1024"},
		{"zero TTL", s.NewMutex("/locks/a", zklock.WithTTL(0)), "TTL 0s is outside the range 10ms to 24h0m0s"},
		{"tiny TTL", s.NewMutex("/locks/a", zklock.WithTTL(time.Millisecond)), "outside the range 10ms to"},
		{"RWMutex bad path", s.NewRWMutex("x").Reader(), "not absolute"},
		{"zero permits", s.NewSemaphore("/locks/s", 0), "at least 1 lease; got 0"},
		{"negative permits", s.NewSemaphore("/locks/s", -2), "got -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, op := range []func(context.Context) (dlock.Lease, error){tt.l.TryLock, tt.l.Lock} {
				lease, err := op(ctx)
				if err == nil || lease != nil {
					t.Fatalf("got a lease (%v); want an error mentioning %q", err, tt.want)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %q does not mention %q", err, tt.want)
				}
			}
		})
	}
	if kids := children(t, admin(t, []string{sharedZK(t).Addr()}), "/locks"); len(kids) != 0 {
		t.Errorf("bad calls created %v under /locks", kids)
	}
	if _, err := s.NewRWMutex("/locks/rw").Downgrade(ctx, nil); err == nil {
		t.Error("Downgrade of a nil lease succeeded")
	}
}

// A closed Client refuses every call with ErrClosed and has released
// what it held.
func TestIntegrationClosedSession(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	s := connect(t, []string{sharedZK(t).Addr()})
	lease, err := s.NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(lease.Err(), dlock.ErrReleased) {
		t.Errorf("lease after Close: %v; want ErrReleased", lease.Err())
	}
	if kids := children(t, admin(t, []string{sharedZK(t).Addr()}), path); len(kids) != 0 {
		t.Errorf("nodes left after Close: %v", kids)
	}
	for _, l := range []dlock.Locker{s.NewMutex(path), s.NewRWMutex(path).Writer(), s.NewSemaphore(path, 2)} {
		if _, err := l.Lock(ctx); !errors.Is(err, zklock.ErrClosed) {
			t.Errorf("Lock on a closed Session = %v; want ErrClosed", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// The ensemble's ACLs are passed through, and digest authentication lets
// the right user in; anyone else gets an error that says what to do.
func TestIntegrationDigestAuth(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	acl := zk.DigestACL(zk.PermAll, "app", "s3cret")
	owner := connect(t, []string{sharedZK(t).Addr()}, zklock.WithDigestAuth("app", "s3cret"), zklock.WithACL(acl...))
	lease, err := owner.NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := owner.Conn().GetACL(path) // reading an ACL needs READ on the node
	if err != nil || len(got) != 1 || got[0].Scheme != "digest" || !strings.HasPrefix(got[0].ID, "app:") {
		t.Fatalf("ACL of the lock path = %v, %v; want the digest ACL of app", got, err)
	}
	// While the lease holds the path: once it is empty, the ensemble
	// reaps it (a container node), and a stranger's Lock would make it
	// again, with its own ACL.
	for _, opts := range [][]zklock.ClientOption{nil, {zklock.WithDigestAuth("app", "wrong")}} {
		_, err := connect(t, []string{sharedZK(t).Addr()}, opts...).NewMutex(path).Lock(ctx)
		if !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), "WithDigestAuth") {
			t.Errorf("Lock without the right credentials = %v; want ErrNoAuth and a hint", err)
		}
	}
	lease.Release(ctx)
	other, err := connect(t, []string{sharedZK(t).Addr()}, zklock.WithDigestAuth("app", "s3cret")).NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock as app from another session: %v", err)
	}
	other.Release(ctx)
}

// WithDigestAuth alone protects the nodes: they are created for the
// authenticated user only, so a Client without the credentials can
// neither read a holder's token nor delete its node (it used to do both:
// the default ACL was world-writable).
func TestIntegrationDigestAuthAloneProtects(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	path := uniquePath(t)
	owner := connect(t, []string{sharedZK(t).Addr()}, zklock.WithDigestAuth("app", "s3cret"))
	lease, err := owner.NewMutex(path).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	node := lease.(*zklock.Lease).Path()
	got, _, err := owner.Conn().GetACL(node)
	if err != nil || len(got) != 1 || got[0].Scheme != "digest" || !strings.HasPrefix(got[0].ID, "app:") {
		t.Fatalf("ACL of the lock node = %v, %v; want the digest ACL of app", got, err)
	}
	stranger := admin(t, []string{sharedZK(t).Addr()})
	if data, _, err := stranger.Get(node); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("an unauthenticated read of the holder's node = %q, %v; want ErrNoAuth", data, err)
	}
	if err := stranger.Delete(node, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("an unauthenticated delete of the holder's node = %v; want ErrNoAuth", err)
	}
	if lease.Err() != nil {
		t.Errorf("the holder's lease ended: %v", lease.Err())
	}
}

// The Client uses the smaller of the timeout it asked for and the one the
// ensemble granted, which it learns from go-zookeeper's log, and
// GrantedTimeout reports the granted one.
func TestIntegrationNegotiatedTimeout(t *testing.T) {
	for _, tt := range []struct{ ask, want, granted time.Duration }{
		{2 * time.Minute, time.Minute, time.Minute},                              // the test servers' maxSessionTimeout
		{100 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond}, // minSessionTimeout, two ticks; the smaller stands
		{5 * time.Second, 5 * time.Second, 5 * time.Second},
	} {
		s := connect(t, []string{sharedZK(t).Addr()}, zklock.WithSessionTimeout(tt.ask))
		if got := s.Timeout(); got != tt.want {
			t.Errorf("asked for %v: Timeout() = %v; want %v", tt.ask, got, tt.want)
		}
		if got := s.GrantedTimeout(); got != tt.granted {
			t.Errorf("asked for %v: GrantedTimeout() = %v; want %v", tt.ask, got, tt.granted)
		}
	}
}

// The server refuses the characters checkPath refuses, and accepts the
// last one below them: checkPath is no stricter than ZooKeeper.
func TestIntegrationServerRefusesWhatCheckPathRefuses(t *testing.T) {
	adm := admin(t, []string{sharedZK(t).Addr()})
	base := fmt.Sprintf("/checkpath-%d", time.Now().UnixNano())
	if _, err := adm.Create(base, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Delete(base, -1) })
	for _, name := range []string{"🔒", "\U00010000"} {
		if _, err := adm.Create(base+"/"+name, nil, 0, zk.WorldACL(zk.PermAll)); err == nil {
			adm.Delete(base+"/"+name, -1)
			t.Errorf("ZooKeeper accepted %q, which checkPath refuses", name)
		}
	}
	ok := base + "/\uf900"
	if _, err := adm.Create(ok, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Errorf("ZooKeeper refused %q, which checkPath accepts: %v", ok, err)
	} else {
		adm.Delete(ok, -1)
	}
}
