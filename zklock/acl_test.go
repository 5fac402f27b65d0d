package zklock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// create makes path with acl through c, and its missing parents, open to
// all (see makePath).
func create(t *testing.T, c *zk.Conn, p string, acl []zk.ACL) {
	t.Helper()
	makePath(t, c, p, acl)
}

// A stranger without credentials who created a lock's path before its
// holders, open to all, could delete the node of a holder authenticated
// with WithDigestAuth (ZooKeeper takes the right to delete a node from
// its parent's ACL) and take the lock. Lock refuses such a path, naming
// it, and leaves no node there. A path the Client created itself, under
// a parent the stranger created open, is safe: the stranger cannot
// delete the holder's node; and once it is empty and the stranger makes
// it again, open, the next Lock refuses it.
func TestIntegrationDigestAuthOpenPath(t *testing.T) {
	servers := []string{sharedZK(t).Addr()}
	ctx := ctxFor(t, time.Minute)
	stranger := admin(t, servers)
	holder := connect(t, servers, zklock.WithDigestAuth("app", "s3cret"))

	shared := uniquePath(t)
	job := shared + "/job"
	create(t, stranger, shared, zk.WorldACL(zk.PermAll))
	create(t, stranger, job, zk.WorldACL(zk.PermAll))
	l, err := holder.NewMutex(job).Lock(ctx)
	if err == nil {
		// Today's hole: the stranger deletes the holder's node and takes
		// the lock while the holder still believes it holds it.
		defer l.Release(ctx)
		node := l.(*zklock.Lease).Path()
		derr := stranger.Delete(node, -1)
		thief, terr := connect(t, servers).NewMutex(job).TryLock(ctx)
		if terr == nil {
			defer thief.Release(ctx)
		}
		t.Fatalf("Lock of %s, created open by a stranger, succeeded; the stranger's delete of the holder's node: %v, and a credential-less TryLock: %v (holder's Err %v)", job, derr, terr, l.Err())
	}
	if errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, zklock.ErrPathACL) || !strings.Contains(err.Error(), job) || !strings.Contains(err.Error(), "world:anyone") {
		t.Errorf("Lock of %s, created open by a stranger: %v; want an error matching ErrPathACL naming the path and world:anyone", job, err)
	}
	if kids := children(t, stranger, job); len(kids) != 0 {
		t.Errorf("%s holds %v after the refused Lock; want nothing", job, kids)
	}

	// The holder creates the path itself, under the stranger's open parent.
	own := shared + "/own"
	l, err = holder.NewMutex(own).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock of %s, which the Client creates: %v", own, err)
	}
	if err := stranger.Delete(l.(*zklock.Lease).Path(), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("the stranger's delete of the holder's node under %s: %v; want ErrNoAuth", own, err)
	}
	if _, err := stranger.Create(own+"/x", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("the stranger's create under %s: %v; want ErrNoAuth", own, err)
	}
	l.Release(ctx)
	// Empty, the path can be deleted by whoever may delete under its
	// parent, and made again open: the next Lock sees it.
	if err := stranger.Delete(own, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	create(t, stranger, own, zk.WorldACL(zk.PermAll))
	if _, err := holder.NewMutex(own).Lock(ctx); !errors.Is(err, zklock.ErrPathACL) {
		t.Errorf("Lock of %s, made again open by a stranger: %v; want ErrPathACL", own, err)
	}

	// Read-only access for others passes; and a Client without
	// credentials or WithACL makes open nodes, and checks nothing.
	readable := shared + "/readable"
	acl := append(zk.DigestACL(zk.PermAll, "app", "s3cret"), zk.WorldACL(zk.PermRead)...)
	create(t, stranger, readable, acl)
	if l, err := holder.NewMutex(readable).Lock(ctx); err != nil {
		t.Errorf("Lock of %s, whose ACL gives others only read: %v", readable, err)
	} else {
		l.Release(ctx)
	}
	if l, err := connect(t, servers).NewMutex(job).Lock(ctx); err != nil {
		t.Errorf("Lock of %s by a Client without credentials: %v", job, err)
	} else {
		l.Release(ctx)
	}
	// Another user's digest is outside the Client's ACL.
	other := shared + "/other"
	create(t, stranger, other, append(zk.DigestACL(zk.PermAll, "app", "s3cret"), zk.DigestACL(zk.PermCreate|zk.PermDelete, "intruder", "pw")...))
	if _, err := holder.NewMutex(other).Lock(ctx); !errors.Is(err, zklock.ErrPathACL) || !strings.Contains(err.Error(), "digest:intruder:") {
		t.Errorf("Lock of %s, whose ACL lets another user delete: %v; want ErrPathACL naming digest:intruder", other, err)
	}
}
