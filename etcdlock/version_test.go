package etcdlock_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// syncBuffer is a bytes.Buffer for a logger written from several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The first Lock of a Client looks at the server's version: one older than
// MinServerVersions (Debian's 3.4.23) is logged once at Warn, and refused
// under WithStrictServerVersion with an error naming the version and the
// option; a newer one (EtcdBuildVersion) is neither.
func TestIntegrationServerVersion(t *testing.T) {
	e := sharedEtcd(t)
	ctx := ctxFor(t, time.Minute)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c := connect(t, []string{e.Addr()}, etcdlock.WithLogger(log))
	m := c.NewMutex("version")
	for range 2 {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatalf("Lock on etcd 3.4.23 without WithStrictServerVersion: %v", err)
		}
		l.Release(ctx)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "3.4.23") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "etcd 3.4.23 is older than") {
		t.Errorf("log after two Locks on etcd 3.4.23 (want one warning naming the version):\n%s", logs.String())
	}

	strict := connect(t, []string{e.Addr()}, etcdlock.WithStrictServerVersion()).NewMutex("version")
	for range 2 {
		_, err := strict.Lock(ctx)
		if err == nil || !strings.Contains(err.Error(), "3.4.23") || !strings.Contains(err.Error(), "WithStrictServerVersion") {
			t.Fatalf("Lock on etcd 3.4.23 with WithStrictServerVersion = %v; want an error naming the version and the option", err)
		}
		if errors.Is(err, dlock.ErrNotObtained) {
			t.Errorf("refusal %v matches ErrNotObtained; the server will not heal", err)
		}
	}
	if ks := keys(t, dial(t, e.Addr()), "version"); len(ks) != 0 {
		t.Errorf("keys left behind: %v", ks)
	}

	fixed := testenv.StartEtcdClusterWith(t, testenv.RequireBuiltEtcd(t), 1)
	logs = syncBuffer{}
	fc := connect(t, fixed.Addrs(), etcdlock.WithStrictServerVersion(), etcdlock.WithLogger(log))
	l, err := fc.NewMutex("version").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock on etcd %s with WithStrictServerVersion: %v", testenv.EtcdBuildVersion, err)
	}
	l.Release(ctx)
	if logs.String() != "" {
		t.Errorf("log on etcd %s: %s", testenv.EtcdBuildVersion, logs.String())
	}
}
