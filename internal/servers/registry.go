package servers

import (
	"errors"
	"os/exec"
	"runtime"
	"sync"
)

// registry holds the PID of every process this package has started, for leak
// checks in tests.
var registry struct {
	sync.Mutex
	pids []int
}

func trackPID(pid int) {
	registry.Lock()
	defer registry.Unlock()
	registry.pids = append(registry.pids, pid)
}

// running holds every server that has been started and not closed, for
// StopAll.
var running serverSet

// StopAll closes every server started by this process that has not been
// closed yet. It is meant for the end of a TestMain or a command.
func StopAll() error { return running.closeAll() }

// A serverSet holds servers that have been started and not closed.
type serverSet struct {
	mu      sync.Mutex
	servers map[*daemon]struct{}
}

func (s *serverSet) add(d *daemon) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers == nil {
		s.servers = make(map[*daemon]struct{})
	}
	s.servers[d] = struct{}{}
}

func (s *serverSet) remove(d *daemon) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.servers, d)
}

// list returns the servers in the set whose program is what, or all of
// them if what is "".
func (s *serverSet) list(what string) []*daemon {
	s.mu.Lock()
	defer s.mu.Unlock()
	var list []*daemon
	for d := range s.servers {
		if what == "" || d.what == what {
			list = append(list, d)
		}
	}
	return list
}

// closeAll closes every server still in the set.
func (s *serverSet) closeAll() error {
	var errs []error
	for _, d := range s.list("") {
		errs = append(errs, d.Close())
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
