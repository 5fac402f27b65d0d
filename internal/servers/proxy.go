package servers

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A Proxy is a TCP proxy on 127.0.0.1 that forwards every connection to a
// target address and can delay, drop, reset or refuse traffic on demand.
// Its methods are safe for concurrent use.
type Proxy struct {
	target    string
	ln        net.Listener
	latency   atomic.Int64 // time.Duration
	replies   atomic.Int64 // time.Duration: see SetReplyLatency
	blackhole atomic.Bool
	refuse    atomic.Bool
	resets    atomic.Int64 // Resets so far: see serve
	cut       sync.Map     // client IP -> true: traffic of its connections is dropped
	requests  atomic.Int64 // see Requests

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup
}

// A link is one proxied connection: a client and its connection to the
// target.
type link struct {
	client, server net.Conn
	from           string        // the client's IP
	dead           chan struct{} // closed when the link is torn down
	once           sync.Once
	answered       atomic.Bool // the target sent data since the client last did
}

// teardown closes both connections. If abort is set, it discards unsent
// data so that the peers see a reset rather than an orderly close.
func (l *link) teardown(abort bool) {
	l.once.Do(func() {
		close(l.dead)
		for _, c := range []net.Conn{l.client, l.server} {
			if abort {
				setLingerZero(c)
			}
			c.Close()
		}
	})
}

func setLingerZero(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
}

// beforeLink, when set by a test, runs in serve between the dial of the
// target and the link's registration.
var beforeLink func()

// chunk is data read from one side, due to be written to the other.
type chunk struct {
	data []byte
	due  time.Time
}

// NewProxy starts a proxy that listens on a port from FreePort on
// 127.0.0.1 and forwards every connection to target. The caller must
// Close it. The port stays claimed after Close, so that a client of the
// closed proxy meets a refused connection: a port from the kernel's
// ephemeral range could be bound, once free, by another test process's
// server, which would then answer the client in the proxy's place.
func NewProxy(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("servers: proxy target: %w", err)
	}
	ln, err := listenFree()
	if err != nil {
		return nil, fmt.Errorf("servers: proxy: %w", err)
	}
	p := &Proxy{target: target, ln: ln, links: make(map[*link]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// listenFree listens on 127.0.0.1 at a port from FreePort, with a new
// port when a program that does not use FreePort bound it meanwhile.
func listenFree() (net.Listener, error) {
	var err error
	for range 10 {
		var port int
		if port, err = FreePort(); err != nil {
			return nil, err
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return ln, nil
		}
	}
	return nil, err
}

// Addr returns the address the proxy listens on, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk of data forwarded in either direction by
// d, so a request and its reply take at least 2*d longer. The delay is
// measured from the moment the proxy reads a chunk and applies to data
// read from then on; data never overtakes data read before it. Delays
// below a millisecond are kept to within tens of microseconds (the last
// milliseconds of a delay are slept in the kernel, not on a runtime
// timer). Zero or a negative d removes the delay.
func (p *Proxy) SetLatency(d time.Duration) {
	p.latency.Store(int64(max(d, 0)))
}

// SetReplyLatency delays data from the target to its clients by d more
// than SetLatency does, leaving requests undelayed: a request reaches the
// target at once and its reply comes d late. Zero or a negative d removes
// the extra delay.
func (p *Proxy) SetReplyLatency(d time.Duration) {
	p.replies.Store(int64(max(d, 0)))
}

// Requests returns how many times, over all connections since the proxy
// started, a client sent data when it had sent none before or the target
// had answered since it last did. For a client that waits for each reply
// before it sends again, that is the number of round trips it made, however
// many commands each carried and however the data was split into packets.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Blackhole controls whether the proxy drops traffic. While on, existing
// and new connections stay open but every byte in either direction is read
// and discarded. When turned off, data read from then on flows again;
// dropped data is lost.
func (p *Proxy) Blackhole(on bool) { p.blackhole.Store(on) }

// Cut controls whether the proxy drops the traffic of connections from
// the IP address ip, as Blackhole does for all of them: a way to cut one
// peer off when each peer connects from an address of its own
// (127.0.0.2, 127.0.0.3, …). Other connections are not affected. Turning
// it off resets the connections from ip, since the bytes dropped would
// leave their two ends out of step (a stream with a hole in it), as a
// real connection would not be; their peers connect again.
func (p *Proxy) Cut(ip string, on bool) {
	if on {
		p.cut.Store(ip, true)
		return
	}
	if _, was := p.cut.LoadAndDelete(ip); !was {
		return
	}
	for _, l := range p.snapshot() {
		if l.from == ip {
			l.teardown(true)
		}
	}
}

// dropping reports whether traffic on l is dropped now.
func (p *Proxy) dropping(l *link) bool {
	if p.blackhole.Load() {
		return true
	}
	_, cut := p.cut.Load(l.from)
	return cut
}

// SetRefuse controls whether the proxy closes new connections as soon as
// it accepts them. Existing connections are not affected.
func (p *Proxy) SetRefuse(on bool) { p.refuse.Store(on) }

// Reset abruptly closes every current connection, in both directions, so
// that clients and the target see a connection reset. New connections
// work as before.
func (p *Proxy) Reset() {
	p.resets.Add(1)
	for _, l := range p.snapshot() {
		l.teardown(true)
	}
}

// Close stops listening, closes every connection and waits until the
// proxy's goroutines have finished. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range p.snapshot() {
		l.teardown(true)
	}
	p.wg.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("servers: proxy: %w", err)
	}
	return nil
}

func (p *Proxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}

// accept accepts connections until the listener is closed.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. too many open files
			continue
		}
		// Read before refuse: SetRefuse(true) then Reset either refuses
		// this connection or resets it (see serve).
		resets := p.resets.Load()
		if p.refuse.Load() {
			setLingerZero(c)
			c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c, resets)
	}
}

// serve connects client to the target and forwards data both ways until
// both directions are finished or the link is torn down. resets is the
// count of Resets when client was accepted: a Reset that came while serve
// dialled the target, before the link was in p.links, tears it down too.
func (p *Proxy) serve(client net.Conn, resets int64) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if beforeLink != nil {
		beforeLink()
	}
	if err != nil {
		setLingerZero(client)
		client.Close()
		return
	}
	from, _, _ := net.SplitHostPort(client.RemoteAddr().String())
	l := &link{client: client, server: server, from: from, dead: make(chan struct{})}
	l.answered.Store(true) // the client's first data is a request
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.teardown(true)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	if p.resets.Load() != resets {
		l.teardown(true)
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, client, server) }()
	go func() { defer wg.Done(); p.pipe(l, server, client) }()
	wg.Wait()
	l.teardown(false)

	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pipe forwards data from src to dst through a FIFO queue. The reader
// stamps each chunk with the time it is due; the writer waits for that
// time, so latency delays data without reordering it. When src reaches
// end of file the queue is drained and dst's write side is shut down.
func (p *Proxy) pipe(l *link, src, dst net.Conn) {
	queue := make(chan chunk, 256)
	written := make(chan struct{})
	go func() {
		defer close(written)
		p.write(l, dst, queue)
	}()
	defer func() { <-written }()
	defer close(queue)

	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if src != l.client {
				l.answered.Store(true)
			} else if l.answered.Swap(false) {
				p.requests.Add(1)
			}
		}
		if n > 0 && !p.dropping(l) {
			delay := p.latency.Load()
			if src != l.client {
				delay += p.replies.Load()
			}
			c := chunk{
				data: append([]byte(nil), buf[:n]...),
				due:  time.Now().Add(time.Duration(delay)),
			}
			select {
			case queue <- c:
			case <-l.dead:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.teardown(true)
			}
			return
		}
	}
}

// preciseSpan is the part of a delay that write sleeps in the kernel
// rather than on a runtime timer: more than a runtime timer's lateness.
const preciseSpan = 2 * time.Millisecond

// preciseSleep sleeps until due in nanosleep system calls, which the
// kernel's high-resolution timers end within tens of microseconds. The
// goroutine holds its OS thread meanwhile but no processor: the runtime
// hands the P on while the call blocks. due is at most about preciseSpan
// away here.
func preciseSleep(due time.Time) {
	for d := time.Until(due); d > 0; d = time.Until(due) {
		ts := syscall.NsecToTimespec(int64(d))
		syscall.Nanosleep(&ts, nil) // EINTR: the loop sleeps the rest
	}
}

// preciseThread locks the calling goroutine to its OS thread for the rest
// of its life and sets the thread's timer slack to 1ns (by default the
// kernel may end a sleep up to 50µs late, a tenth of 0.5ms). The thread
// ends with the goroutine, so no other goroutine inherits the setting.
func preciseThread() {
	runtime.LockOSThread()
	const prSetTimerslack = 29 // PR_SET_TIMERSLACK, linux/prctl.h
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
}

// write writes queued chunks to dst when they are due, dropping them while
// the proxy is blackholed.
func (p *Proxy) write(l *link, dst net.Conn, queue <-chan chunk) {
	var timer *time.Timer
	precise := false // this goroutine is on a thread of its own with no timer slack
	for c := range queue {
		// The runtime's timers wake up to a millisecond late (its
		// poller sleeps in whole milliseconds), which would double a
		// delay of 0.5ms: wait on a timer only for what lies beyond
		// preciseSpan, and sleep the rest in the kernel.
		if d := time.Until(c.due) - preciseSpan; d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-timer.C:
			case <-l.dead:
				timer.Stop()
				return
			}
		}
		if !precise && time.Until(c.due) > 0 {
			precise = true
			preciseThread()
		}
		preciseSleep(c.due)
		if p.dropping(l) {
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			l.teardown(true)
			return
		}
	}
	// The source reached end of file: pass the half-close on.
	select {
	case <-l.dead:
	default:
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
}
