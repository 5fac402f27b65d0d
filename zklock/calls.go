package zklock

import (
	"context"

	"github.com/go-zookeeper/zk"
)

// The go-zookeeper calls dlock makes, bounded by a context. Each returns
// everything through await's result: a call abandoned at ctx's end finishes
// on its own goroutine and must not write to its caller's variables.

type nodeAnswer struct {
	exists bool
	stat   *zk.Stat
	watch  <-chan zk.Event
}

func (s *Session) exists(ctx context.Context, path string) (bool, *zk.Stat, error) {
	a, err := await(ctx, func() (nodeAnswer, error) {
		ok, st, err := s.conn.Exists(path)
		return nodeAnswer{exists: ok, stat: st}, err
	})
	return a.exists, a.stat, err
}

// existsW is exists with a watch that fires when path is created, deleted
// or has its data changed.
func (s *Session) existsW(ctx context.Context, path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	a, err := await(ctx, func() (nodeAnswer, error) {
		ok, st, ch, err := s.conn.ExistsW(path)
		return nodeAnswer{exists: ok, stat: st, watch: ch}, err
	})
	return a.exists, a.stat, a.watch, err
}

type childrenAnswer struct {
	names []string
	stat  *zk.Stat // the parent's
	watch <-chan zk.Event
}

func (s *Session) children(ctx context.Context, dir string) ([]string, *zk.Stat, error) {
	a, err := await(ctx, func() (childrenAnswer, error) {
		names, st, err := s.conn.Children(dir)
		return childrenAnswer{names: names, stat: st}, err
	})
	return a.names, a.stat, err
}

// childrenW is children with a watch that fires when dir's children
// change after this listing.
func (s *Session) childrenW(ctx context.Context, dir string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	a, err := await(ctx, func() (childrenAnswer, error) {
		names, st, ch, err := s.conn.ChildrenW(dir)
		return childrenAnswer{names: names, stat: st, watch: ch}, err
	})
	return a.names, a.stat, a.watch, err
}

// sync waits until the server this client is connected to has caught up
// with the leader. A sync travels to the leader and back, so a server cut
// off from the leader cannot complete it.
func (s *Session) sync(ctx context.Context, path string) error {
	_, err := await(ctx, func() (string, error) { return s.conn.Sync(path) })
	return err
}

func (s *Session) delete(ctx context.Context, path string) error {
	_, err := await(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
	return err
}
