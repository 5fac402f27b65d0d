package zklock

import (
	"context"
	"errors"
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

// aclRights returns the rights that the Client's ACL gives each identity
// ("scheme:id"), as the ACL of node, the Client's own, shows it: there
// ZooKeeper has turned the "auth" scheme into the session's identities
// (a digest user, an x509 subject). If the Client's ACL does not let it
// read node, the "auth" scheme stands for WithDigestAuth's users; if node
// is gone or the ensemble did not answer, the error says so: guessing
// then would leave out an x509 subject and call the path open.
func (s *Client) aclRights(ctx context.Context, node string) (map[string]int32, error) {
	s.mu.Lock()
	g := s.aclGranted
	s.mu.Unlock()
	if g != nil {
		return g, nil
	}
	g = map[string]int32{}
	acl, err := call(ctx, s, func(c *zk.Conn) ([]zk.ACL, error) {
		acl, _, err := c.GetACL(node)
		return acl, err
	})
	if err == nil {
		for _, a := range acl {
			g[a.Scheme+":"+a.ID] |= a.Perms
		}
		s.mu.Lock()
		s.aclGranted = g
		s.mu.Unlock()
		return g, nil
	}
	if !errors.Is(err, zk.ErrNoAuth) {
		return nil, err
	}
	for _, a := range s.cfg.acl {
		if a.Scheme != "auth" {
			g[a.Scheme+":"+a.ID] |= a.Perms
			continue
		}
		for _, cred := range s.cfg.auth {
			user, password, _ := strings.Cut(cred, ":")
			for _, d := range zk.DigestACL(a.Perms, user, password) {
				g[d.Scheme+":"+d.ID] |= a.Perms
			}
		}
	}
	return g, nil
}

// aclChecked is the identity of a lock path whose ACL passed: its
// creation (a path deleted and created again is checked again) and the
// version of its ACL.
type aclChecked struct {
	czxid    int64
	aversion int32
}

// checkACL returns an error matching ErrPathACL if the ACL of dir, whose
// Stat from a listing is st, gives someone rights to create, delete or
// administer its children that the Client's ACL does not give them; nil
// if it does not, or if the Client's nodes are open to all anyway. node
// is the Client's own node in dir. It reads the ACL once per creation
// and ACL version of dir.
func (s *Client) checkACL(ctx context.Context, dir, node string, st *zk.Stat) error {
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
	g, err := s.aclRights(ctx, node)
	if err != nil {
		return err
	}
	var open []string
	for _, e := range a.acl {
		id := e.Scheme + ":" + e.ID
		if more := e.Perms & unsafePerms &^ (g[id] | g["world:anyone"]); more != 0 {
			open = append(open, fmt.Sprintf("%s (%s)", id, perms(more)))
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
