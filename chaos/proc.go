package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A clientProc is one client process and the reader of its events.
type clientProc struct {
	id    int // 1-based, as in the history
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the process has exited and its output is read
	err   error         // from Wait, once done is closed

	mu     sync.Mutex
	stderr strings.Builder // the last of what it wrote to stderr
}

// startClient starts client process id with cfg, adding what it reports
// to h. command is the program and its arguments (RunClientIfChild must run
// first thing in it).
func startClient(command []string, cfg clientConfig, h *History, onEvent func(Event)) (*clientProc, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(os.Environ(), ClientEnv+"="+string(raw), clientGORACE())
	p := &clientProc{id: cfg.ID, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = (*tail)(p)
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: starting client %d (%s): %w", cfg.ID, command[0], err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.At == 0 || e.Client != cfg.ID {
				p.note("unreadable event: " + sc.Text())
				continue
			}
			h.Add(e)
			onEvent(e)
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// clientGORACE returns the GORACE setting of a client: the harness's
// own, with no sleep at exit. A program built with -race otherwise
// sleeps a second before it exits (atexit_sleep_ms), and a run waits for
// its clients to exit: a second of every short run. A race is still
// reported, and the exit code still says so (raceExit).
func clientGORACE() string {
	opts := os.Getenv("GORACE")
	if !strings.Contains(opts, "atexit_sleep_ms") {
		opts = strings.TrimSpace(opts + " atexit_sleep_ms=0")
	}
	return "GORACE=" + opts
}

// tail keeps the last 64 KiB a client wrote to stderr.
type tail clientProc

func (t *tail) Write(b []byte) (int, error) {
	(*clientProc)(t).note(string(b))
	return len(b), nil
}

func (p *clientProc) note(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stderr.WriteString(s)
	if p.stderr.Len() > 64<<10 {
		rest := p.stderr.String()[p.stderr.Len()-64<<10:]
		p.stderr.Reset()
		p.stderr.WriteString(rest)
	}
}

// Stderr returns the last of what the client wrote to stderr.
func (p *clientProc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimSpace(p.stderr.String())
}

func (p *clientProc) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return fmt.Errorf("client %d has exited", p.id)
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// stop asks the client to finish (by closing its stdin) and waits up to
// grace for it, then kills it. It reports whether the client exited by
// itself with status 0.
func (p *clientProc) stop(grace time.Duration) bool {
	p.cmd.Process.Signal(syscall.SIGCONT) // in case a fault left it stopped
	p.stdin.Close()
	select {
	case <-p.done:
		return p.err == nil || p.onlyKnownRaces()
	case <-time.After(grace):
		// A Go client prints every goroutine's stack on SIGQUIT: what it
		// was stuck in goes into the note.
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		return false
	}
}

// exited reports whether the process has ended.
func (p *clientProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// raceExit is the exit code of a client built with -race that reported a
// data race (GORACE's default exitcode).
const raceExit = 66

// knownRace is a data race inside go-zookeeper v1.0.4 itself: on a
// reconnection, sendSetWatches reads Conn.lastZxid while the new recvLoop
// writes it (go-zookeeper/zk pull request #35, not merged). dlock cannot
// fix it without forking the library; a -race client that reconnects under
// faults can hit it. Both accesses are in the library's own goroutines.
var knownRace = []string{"go-zookeeper/zk.(*Conn).recvLoop()", "go-zookeeper/zk.(*Conn).sendSetWatches()"}

// onlyKnownRaces reports whether the client exited only because the race
// detector found races, all of them knownRace: any other race, or any
// other failure, still fails the run.
func (p *clientProc) onlyKnownRaces() bool {
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.ExitCode() != raceExit {
		return false
	}
	reports := strings.Split(p.Stderr(), "WARNING: DATA RACE")[1:]
	if len(reports) == 0 {
		return false
	}
	for _, r := range reports {
		r, _, _ = strings.Cut(r, "Goroutine ") // the two accesses, not where the goroutines started
		for _, frame := range knownRace {
			if !strings.Contains(r, frame) {
				return false
			}
		}
	}
	return true
}
