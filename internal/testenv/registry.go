package testenv

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"
)

// registry holds every Redis that has been started and not closed.
var registry struct {
	sync.Mutex
	servers map[*Redis]struct{}
	pids    []int // every PID ever started, for leak checks in tests
}

func register(r *Redis) {
	registry.Lock()
	defer registry.Unlock()
	if registry.servers == nil {
		registry.servers = make(map[*Redis]struct{})
	}
	registry.servers[r] = struct{}{}
}

func unregister(r *Redis) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.servers, r)
}

func trackPID(pid int) {
	registry.Lock()
	defer registry.Unlock()
	registry.pids = append(registry.pids, pid)
}

// StopAll closes every server started by this process that has not been
// closed yet. It is meant for the end of a TestMain or a command.
func StopAll() error {
	registry.Lock()
	servers := make([]*Redis, 0, len(registry.servers))
	for r := range registry.servers {
		servers = append(servers, r)
	}
	registry.Unlock()
	var errs []error
	for _, r := range servers {
		errs = append(errs, r.Close())
	}
	errs = append(errs, zookeepers.closeAll(), postgreses.closeAll(), mariadbs.closeAll(), etcds.closeAll())
	return errors.Join(errs...)
}

// A serverSet holds the servers of one kind that have been started and
// not closed, for StopAll.
type serverSet[T interface {
	comparable
	Close() error
}] struct {
	mu      sync.Mutex
	servers map[T]struct{}
}

func (s *serverSet[T]) add(srv T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers == nil {
		s.servers = make(map[T]struct{})
	}
	s.servers[srv] = struct{}{}
}

func (s *serverSet[T]) remove(srv T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.servers, srv)
}

// len returns the number of servers in the set.
func (s *serverSet[T]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.servers)
}

// closeAll closes every server still in the set.
func (s *serverSet[T]) closeAll() error {
	s.mu.Lock()
	servers := make([]T, 0, len(s.servers))
	for srv := range s.servers {
		servers = append(servers, srv)
	}
	s.mu.Unlock()
	var errs []error
	for _, srv := range servers {
		errs = append(errs, srv.Close())
	}
	return errors.Join(errs...)
}

// spawner starts processes from a goroutine locked to its OS thread for
// the life of the process: Pdeathsig fires when the thread that started a
// child exits, and this thread never does.
var spawner struct {
	once sync.Once
	reqs chan func()
}

func spawn(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range spawner.reqs {
				f()
			}
		}()
	})
	errc := make(chan error, 1)
	spawner.reqs <- func() { errc <- cmd.Start() }
	return <-errc
}
