package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// testSessionTimeout is the session timeout test sessions ask for: long
// enough to ride out a loaded machine, short enough to expire in a test.
const testSessionTimeout = 3 * time.Second

// connect opens a Client to servers, closed when t ends.
func connect(t testing.TB, servers []string, opts ...zklock.ClientOption) *zklock.Client {
	t.Helper()
	opts = append([]zklock.ClientOption{zklock.WithSessionTimeout(testSessionTimeout)}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := zklock.New(ctx, servers, opts...)
	if err != nil {
		t.Fatalf("Connect(%v): %v", servers, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// admin opens a plain go-zookeeper connection for out-of-band work.
func admin(t testing.TB, servers []string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(servers, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// makePath creates p through c with acl, and its missing ancestors as
// persistent nodes open to all; p may exist already. An ancestor that goes
// before its child is made is made again: the shared /dlock-test may be a
// container node (zklock makes it one), which ZooKeeper reaps, within a
// second in tests, whenever no test has a path under it.
func makePath(t testing.TB, c *zk.Conn, p string, acl []zk.ACL) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := createChain(c, p, acl)
		if err == nil {
			return
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt == 10 {
			t.Fatalf("creating %s: %v", p, err)
		}
	}
}

// createChain is one attempt of makePath.
func createChain(c *zk.Conn, p string, acl []zk.ACL) error {
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		a := zk.WorldACL(zk.PermAll)
		if i == len(p) {
			a = acl
		}
		if _, err := c.Create(p[:i], nil, 0, a); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// children lists path's children through c, retrying while the client
// reconnects; a missing path has none.
func children(t testing.TB, c *zk.Conn, path string) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		kids, _, err := c.Children(path)
		switch {
		case err == nil:
			return kids
		case err == zk.ErrNoNode:
			return nil
		case time.Now().After(deadline):
			t.Fatalf("Children(%s): %v", path, err)
		}
	}
}

// uniquePath returns a lock path no other test uses.
func uniquePath(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	return fmt.Sprintf("/dlock-test/%s-%08x", name, rand.Uint32())
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
