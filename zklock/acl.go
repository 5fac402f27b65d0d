package zklock

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// ZooKeeper takes the right to create or delete a node from its parent's
// ACL, not the node's own: whoever may delete the children of a lock's
// path may delete its holder's node, and the next node in line then
// holds. A Client that protects its nodes (WithDigestAuth, WithACL)
// checks the ACL of each lock path it queues under, once its node is
// there: the path cannot be deleted, and so replaced with another ACL,
// while it has a child. Its parents matter only while it is empty, and a
// path replaced then is seen at the next check.

// guarded reports whether the Client's ACL keeps anyone out, so that a
// lock path open to others would defeat it.
func (c *clientConfig) guarded() bool {
	for _, a := range c.acl {
		if a.Scheme == "world" && a.ID == "anyone" && a.Perms&unsafePerms != 0 {
			return false
		}
	}
	return len(c.auth) > 0 || c.aclSet
}

// unsafePerms are the rights on a lock path that let their bearer delete
// or replace the holders' nodes: creating children (queueing ahead of
// waiters), deleting them, and changing the ACL.
const unsafePerms = zk.PermCreate | zk.PermDelete | zk.PermAdmin

// insiders returns the identities ("scheme:id") that the Client's ACL
// names: its own entries, with the "auth" scheme standing for the
// digests of WithDigestAuth's credentials, as ZooKeeper expands it.
func (c *clientConfig) insiders() map[string]bool {
	in := map[string]bool{}
	for _, a := range c.acl {
		if a.Scheme != "auth" {
			in[a.Scheme+":"+a.ID] = true
			continue
		}
		for _, cred := range c.auth {
			user, password, _ := strings.Cut(cred, ":")
			for _, d := range zk.DigestACL(zk.PermAll, user, password) {
				in[d.Scheme+":"+d.ID] = true
			}
		}
	}
	return in
}

// aclChecked is the identity of a lock path whose ACL passed: its
// creation (a path deleted and created again is checked again) and the
// version of its ACL.
type aclChecked struct {
	czxid    int64
	aversion int32
}

// checkACL returns an error matching ErrPathACL if the ACL of dir, whose
// Stat from a listing is st, lets someone outside the Client's ACL
// create, delete or administer its children; nil if it does not, or if
// the Client's nodes are open to all anyway. It reads the ACL once per
// creation and ACL version of dir.
func (s *Client) checkACL(ctx context.Context, dir string, st *zk.Stat) error {
	if !s.cfg.guarded() {
		return nil
	}
	s.mu.Lock()
	ok := st != nil && s.aclOK[dir] == aclChecked{st.Czxid, st.Aversion}
	s.mu.Unlock()
	if ok {
		return nil
	}
	type answer struct {
		acl []zk.ACL
		st  *zk.Stat
	}
	a, err := call(ctx, s, func(c *zk.Conn) (answer, error) {
		acl, st, err := c.GetACL(dir)
		return answer{acl, st}, err
	})
	if err != nil {
		return err
	}
	in := s.cfg.insiders()
	var open []string
	for _, e := range a.acl {
		if id := e.Scheme + ":" + e.ID; e.Perms&unsafePerms != 0 && !in[id] {
			open = append(open, fmt.Sprintf("%s (%s)", id, perms(e.Perms&unsafePerms)))
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("%w: %s lets %s, outside the Client's ACL, create or delete the lock's nodes (ZooKeeper gives those rights by the parent's ACL), "+
			"so they could delete the holder's node and take the lock; set its ACL to the Client's (setAcl), or delete it and let the Client create it",
			ErrPathACL, dir, strings.Join(open, ", "))
	}
	s.mu.Lock()
	if len(s.aclOK) >= maxACLChecked {
		clear(s.aclOK)
	}
	s.aclOK[dir] = aclChecked{a.st.Czxid, a.st.Aversion}
	s.mu.Unlock()
	return nil
}

// maxACLChecked bounds the paths whose checked ACL a Client remembers.
const maxACLChecked = 4096

// perms names the rights in p, as ZooKeeper's CLI does: "cda".
func perms(p int32) string {
	var b strings.Builder
	for _, r := range []struct {
		bit  int32
		name byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if p&r.bit != 0 {
			b.WriteByte(r.name)
		}
	}
	return b.String()
}
