package zklock

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"
)

// The go-zookeeper calls dlock makes, on the Client's connection (see
// call), bounded by a context. Each returns everything through await's
// result: a call abandoned at ctx's end finishes on its own goroutine and
// must not write to its caller's variables.

type nodeAnswer struct {
	exists bool
	stat   *zk.Stat
	watch  <-chan zk.Event
}

func (s *Client) exists(ctx context.Context, path string) (bool, *zk.Stat, error) {
	a, err := call(ctx, s, func(c *zk.Conn) (nodeAnswer, error) {
		ok, st, err := c.Exists(path)
		return nodeAnswer{exists: ok, stat: st}, err
	})
	return a.exists, a.stat, err
}

// existsW is exists with a watch that fires when path is created, deleted
// or has its data changed, or when the connection is replaced.
func (s *Client) existsW(ctx context.Context, path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	a, err := call(ctx, s, func(c *zk.Conn) (nodeAnswer, error) {
		ok, st, ch, err := c.ExistsW(path)
		return nodeAnswer{exists: ok, stat: st, watch: ch}, err
	})
	return a.exists, a.stat, a.watch, err
}

// watchNode is a read of path with a watch that fires when path is
// deleted or has its data changed, or when the connection is replaced.
// Unlike existsW it leaves no watch behind on a path that does not exist,
// which it reports as false: ZooKeeper would keep an exists watch on it
// until the session ends, and a lock node, once gone, never comes back.
func (s *Client) watchNode(ctx context.Context, path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	a, err := call(ctx, s, func(c *zk.Conn) (nodeAnswer, error) {
		_, st, ch, err := c.GetW(path)
		if errors.Is(err, zk.ErrNoNode) {
			return nodeAnswer{}, nil
		}
		return nodeAnswer{exists: err == nil, stat: st, watch: ch}, err
	})
	return a.exists, a.stat, a.watch, err
}

type childrenAnswer struct {
	names []string
	stat  *zk.Stat // the parent's
	watch <-chan zk.Event
}

func (s *Client) children(ctx context.Context, dir string) ([]string, *zk.Stat, error) {
	a, err := call(ctx, s, func(c *zk.Conn) (childrenAnswer, error) {
		names, st, err := c.Children(dir)
		return childrenAnswer{names: names, stat: st}, err
	})
	return a.names, a.stat, err
}

// childrenW is children with a watch that fires when dir's children
// change after this listing, or when the connection is replaced.
func (s *Client) childrenW(ctx context.Context, dir string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	a, err := call(ctx, s, func(c *zk.Conn) (childrenAnswer, error) {
		names, st, ch, err := c.ChildrenW(dir)
		return childrenAnswer{names: names, stat: st, watch: ch}, err
	})
	return a.names, a.stat, a.watch, err
}

// sync waits until the server this client is connected to has caught up
// with the leader. A sync travels to the leader and back, so a server cut
// off from the leader cannot complete it.
func (s *Client) sync(ctx context.Context, path string) error {
	_, err := call(ctx, s, func(c *zk.Conn) (string, error) { return c.Sync(path) })
	return err
}

func (s *Client) delete(ctx context.Context, path string) error {
	_, err := call(ctx, s, func(c *zk.Conn) (struct{}, error) { return struct{}{}, c.Delete(path, -1) })
	return err
}

// set sets path's data if its version is version.
func (s *Client) set(ctx context.Context, path string, data []byte, version int32) (*zk.Stat, error) {
	return call(ctx, s, func(c *zk.Conn) (*zk.Stat, error) { return c.Set(path, data, version) })
}
