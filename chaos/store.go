package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/fence"
)

// A Store is the resource the clients protect with the lock, served on a
// loopback port by the harness: a fenced register and an unfenced set.
//
// The fenced register accepts a write only if its fence is at least as
// high as every fence it has accepted before, and records each write it
// accepts or refuses in the history, stamped when it decides; a read
// returns the fence and value of the last write it accepted. It decides
// through package fence's memory Store, the one fence.Handler keeps for an
// HTTP service, so every run checks that guard's verdicts. The set is
// read and replaced whole, with no check at all: a client that reads it,
// adds an element and writes it back loses another client's element if
// the two did so at once. That is Jepsen's lost-update workload.
//
// The protocol is one line per request and per reply:
//
//	FWRITE client fence value  ->  OK | REFUSED max
//	FREAD                      ->  REG fence value    (REG 0 alone when never written)
//	GET                        ->  SET elem,elem,...   (SET alone when empty)
//	PUT elem,elem,...          ->  OK
type Store struct {
	ln   net.Listener
	hist *History
	wg   sync.WaitGroup

	mu       sync.Mutex
	register fence.Store // the fenced register's highest fence
	regFence uint64      // the fence and value of its last accepted write
	regValue string
	set      []string
	conns    map[net.Conn]bool
}

// NewStore starts a Store on a free loopback port, recording in h.
func NewStore(h *History) (*Store, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: store: %w", err)
	}
	s := &Store{ln: ln, hist: h, conns: map[net.Conn]bool{}, register: fence.NewMemory()}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr returns the address clients connect to.
func (s *Store) Addr() string { return s.ln.Addr().String() }

// Final returns the set's contents.
func (s *Store) Final() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.set...)
}

// Close stops serving and waits for the connections to end.
func (s *Store) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Store) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Store) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	r := bufio.NewReaderSize(c, 64<<10)
	w := bufio.NewWriter(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		reply := s.handle(strings.TrimRight(line, "\r\n"))
		if _, err := w.WriteString(reply + "\n"); err != nil {
			return
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// handle executes one request and returns the reply.
func (s *Store) handle(line string) string {
	cmd, rest, _ := strings.Cut(line, " ")
	switch cmd {
	case "FWRITE":
		f := strings.SplitN(rest, " ", 3)
		if len(f) != 3 {
			return "ERR FWRITE needs client, fence and value"
		}
		client, err1 := strconv.Atoi(f[0])
		fence, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil || client < 1 {
			return "ERR FWRITE: bad client or fence"
		}
		return s.fencedWrite(client, fence, f[2])
	case "FREAD":
		s.mu.Lock()
		defer s.mu.Unlock()
		return strings.TrimSuffix(fmt.Sprintf("REG %d %s", s.regFence, s.regValue), " ")
	case "GET":
		s.mu.Lock()
		defer s.mu.Unlock()
		return "SET " + strings.Join(s.set, ",")
	case "PUT":
		var set []string
		if rest != "" {
			set = strings.Split(rest, ",")
		}
		s.mu.Lock()
		s.set = set
		s.mu.Unlock()
		return "OK"
	}
	return fmt.Sprintf("ERR unknown command %q", cmd)
}

// fencedWrite decides a write and records the decision while holding the
// lock, so that the history orders decisions as the register made them.
func (s *Store) fencedWrite(client int, f uint64, value string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.register.Advance(context.Background(), "register", f)
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		s.hist.Add(Event{Op: OpRefused, Client: client, Fence: f, Max: stale.Newest, Value: value})
		return "REFUSED " + strconv.FormatUint(stale.Newest, 10)
	}
	if err != nil {
		return "ERR FWRITE: " + err.Error()
	}
	s.hist.Add(Event{Op: OpWrite, Client: client, Fence: f, Value: value})
	s.regFence, s.regValue = f, value
	return "OK"
}

// A storeConn is a client's connection to the Store.
type storeConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialStore(addr string) (*storeConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &storeConn{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

func (sc *storeConn) call(req string) (string, error) {
	if _, err := sc.c.Write([]byte(req + "\n")); err != nil {
		return "", err
	}
	line, err := sc.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\n")
	if strings.HasPrefix(line, "ERR ") {
		return "", errors.New("chaos: store: " + line[4:])
	}
	return line, nil
}

// get reads the set.
func (sc *storeConn) get() ([]string, error) {
	reply, err := sc.call("GET")
	if err != nil {
		return nil, err
	}
	body, ok := strings.CutPrefix(reply, "SET")
	if !ok {
		return nil, fmt.Errorf("chaos: store: GET answered %q", reply)
	}
	body = strings.TrimPrefix(body, " ")
	if body == "" {
		return nil, nil
	}
	return strings.Split(body, ","), nil
}

// put replaces the set.
func (sc *storeConn) put(set []string) error {
	reply, err := sc.call("PUT " + strings.Join(set, ","))
	if err == nil && reply != "OK" {
		err = fmt.Errorf("chaos: store: PUT answered %q", reply)
	}
	return err
}

// write makes a fenced write; it reports whether the register accepted it,
// and if not, the highest fence the register had seen.
func (sc *storeConn) write(client int, fence uint64, value string) (ok bool, max uint64, err error) {
	reply, err := sc.call(fmt.Sprintf("FWRITE %d %d %s", client, fence, value))
	switch {
	case err != nil:
		return false, 0, err
	case reply == "OK":
		return true, 0, nil
	case strings.HasPrefix(reply, "REFUSED "):
		if max, err := strconv.ParseUint(reply[len("REFUSED "):], 10, 64); err == nil {
			return false, max, nil
		}
	}
	return false, 0, fmt.Errorf("chaos: store: FWRITE answered %q", reply)
}

// read reads the fenced register: the fence and value of the last write
// it accepted.
func (sc *storeConn) read() (uint64, string, error) {
	reply, err := sc.call("FREAD")
	if err != nil {
		return 0, "", err
	}
	body, ok := strings.CutPrefix(reply, "REG ")
	num, value, _ := strings.Cut(body, " ")
	f, err := strconv.ParseUint(num, 10, 64)
	if !ok || err != nil {
		return 0, "", fmt.Errorf("chaos: store: FREAD answered %q", reply)
	}
	return f, value, nil
}

func (sc *storeConn) close() error { return sc.c.Close() }
