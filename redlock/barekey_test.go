package redlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
)

// Bad keys, and an election, are refused WithBareKey; no server is needed.
func TestBareKeyRefusals(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, goRedis)
	bare := redlock.WithBareKey()
	if _, err := c.NewElection("k", bare).Campaign(ctx, "v"); !errors.Is(err, redlock.ErrBareKeyUnsupported) {
		t.Errorf("NewElection WithBareKey: Campaign returned %v; want ErrBareKeyUnsupported", err)
	}
	for _, tt := range []struct{ key, want string }{
		{"", "WithBareKey: empty key"},
		{"dlock:{x}", `starts with "dlock:"`},
		{"a\xffb", "not valid UTF-8"},
	} {
		if l, err := c.NewMutex(tt.key, bare).TryLock(ctx); l != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("key %q: got %v, %v; want an error mentioning %q", tt.key, l, err, tt.want)
		}
	}
}

// On every node, the bare key holds the token alone, with the TTL, and
// nothing of dlock's layout is written but the slot's fence counter; a
// key held by another owner on a majority is not taken.
func TestIntegrationBareKeyLayout(t *testing.T) {
	t.Parallel()
	servers := make([]*testenv.Redis, 3)
	for i := range servers {
		servers[i] = testenv.StartRedis(t, testenv.RedisConfig{})
	}
	age(t, servers)
	ctx := timeout(t, 20*time.Second)
	for _, tr := range transports {
		c := newClient(t, addrsOf(servers), tr.open)
		key := "{bare}:" + tr.name
		m := c.NewMutex(key, redlock.WithBareKey(), redlock.WithTTL(2*time.Second))
		l, err := m.TryLock(ctx)
		if err != nil {
			t.Fatalf("%s: TryLock: %v", tr.name, err)
		}
		// A grant returns once a majority voted: the last node's SET may
		// still be on its way.
		held := 0
		for _, s := range servers {
			v, _ := s.Do("GET", key)
			if v == "" {
				continue
			}
			if v != l.Token() {
				t.Fatalf("%s: node %s holds %q; want the token %q alone", tr.name, s.Addr(), v, l.Token())
			}
			held++
			if v, _ := s.Do("PTTL", key); atoi(v) <= 0 || atoi(v) > 2000 {
				t.Fatalf("%s: PTTL %s", tr.name, v)
			}
			if v, _ := s.Do("KEYS", "dlock:*"); strings.Contains(v, "{bare}") || strings.Contains(v, key) {
				t.Fatalf("%s: dlock's layout keys beside the bare key: %q", tr.name, v)
			}
		}
		if held < 2 {
			t.Fatalf("%s: the token is on %d of 3 nodes; want a majority", tr.name, held)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Another owner on two of the three nodes.
		for _, s := range servers[:2] {
			if _, err := s.Do("SET", key, "foreign", "PX", "5000"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("%s: TryLock with a majority held by another owner: %v", tr.name, err)
		}
		for _, s := range servers {
			if v, _ := s.Do("GET", key); v != "" && v != "foreign" && v != l.Token() { // the released lease's, on its way out
				t.Fatalf("%s: node %s holds %q after a failed attempt", tr.name, s.Addr(), v)
			}
			s.Do("DEL", key)
		}
	}
}
