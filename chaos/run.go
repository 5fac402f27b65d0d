package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"time"
)

// Defaults of Options, listed in one place.
const (
	DefaultClients        = 5
	DefaultTTL            = time.Second
	DefaultWork           = 20 * time.Millisecond
	DefaultSessionTimeout = 1500 * time.Millisecond
	DefaultDuration       = time.Minute

	MinTTL     = 200 * time.Millisecond
	MaxClients = 32
)

// ErrUnavailable is returned by Run when the servers of the backend cannot
// be started (a binary is missing, or a server failed to start).
var ErrUnavailable = errors.New("chaos: servers unavailable")

// Options configure a Run. The zero value of each field means its default.
type Options struct {
	// Backend is one of Backends. It has no default.
	Backend string
	// Duration is how long the clients contend, faults included, from
	// their first grant (or from 30s after they started, if none came);
	// the default is DefaultDuration.
	Duration time.Duration
	// Clients is the number of client processes, 2 to MaxClients; the
	// default is DefaultClients.
	Clients int
	// TTL is the lease time of the lock, renewed while held; at least
	// MinTTL, by default DefaultTTL.
	TTL time.Duration
	// Work is how long a client stays in its critical section, between
	// reading the set and writing it back; by default DefaultWork, at most
	// TTL/4.
	Work time.Duration
	// SessionTimeout is the ZooKeeper session timeout; by default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Faults are the faults to inject, from FaultsFor(Backend); by default
	// all of them. An empty, non-nil slice injects none.
	Faults []string
	// Gap is the quiet time between the end of one fault and the start of
	// the next; by default Window(), so that every violation can be put
	// down to one fault.
	Gap time.Duration
	// Random picks each fault at random; otherwise they come in the order
	// of Faults, round and round. Targets are picked at random either way.
	Random bool
	// Seed seeds every random choice, of the harness and of the clients;
	// zero picks one, which the Result reports.
	Seed uint64
	// LibraryDefaults builds the clients' Redis connections as the README
	// tells users to: go-redis with its own timeouts and retries, and
	// ContextTimeoutEnabled. Otherwise they are tuned for the run: every
	// timeout a quarter of the TTL (at most a second) and no retries.
	LibraryDefaults bool
	// TLS makes the clients reach the servers through TLS, with a client
	// certificate, and log in with a password: on Redis as an ACL user
	// with the least rights the README gives, on ZooKeeper (its secure
	// client port) with digest authentication. Only for the backends
	// TLSBackend accepts.
	TLS bool
	// Command starts a client: a program that calls RunClientIfChild first
	// thing. The default is this process's own executable.
	Command []string
	// Progress, if not nil, is called about twice a second while the run
	// goes on.
	Progress func(Progress)
}

// Window is how long after a fault a violation is still put down to it:
// twice the longest time a lease or ZooKeeper session can outlive its
// holder's silence, and half a second for the servers to settle.
func (o Options) Window() time.Duration {
	return 2*max(o.TTL, o.sessionTimeout()) + 500*time.Millisecond
}

func (o Options) sessionTimeout() time.Duration {
	if s := serviceOf(o.Backend); s != nil && s.checkSession != nil {
		return o.SessionTimeout
	}
	return 0
}

// resolve fills in the defaults and checks the options.
func (o Options) resolve() (Options, error) {
	if !validBackend(o.Backend) {
		return o, fmt.Errorf("chaos: unknown backend %q; use one of %v", o.Backend, Backends)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Duration, DefaultDuration)
	def(&o.TTL, DefaultTTL)
	def(&o.Work, DefaultWork)
	def(&o.SessionTimeout, DefaultSessionTimeout)
	if o.Clients == 0 {
		o.Clients = DefaultClients
	}
	if o.Faults == nil {
		o.Faults = FaultsFor(o.Backend)
	}
	def(&o.Gap, o.Window())
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	if len(o.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("chaos: cannot find this program to start clients: %w", err)
		}
		o.Command = []string{exe}
	}
	var sessionErr error
	if s := serviceOf(o.Backend); s != nil && s.checkSession != nil {
		sessionErr = s.checkSession(o.SessionTimeout)
	}
	switch {
	case o.Clients < 2 || o.Clients > MaxClients:
		return o, fmt.Errorf("chaos: %d clients; use 2 to %d", o.Clients, MaxClients)
	case o.TTL < MinTTL:
		return o, fmt.Errorf("chaos: TTL %v is below the minimum %v", o.TTL, MinTTL)
	case o.Work <= 0 || o.Work > o.TTL/4:
		return o, fmt.Errorf("chaos: work time %v must be positive and at most a quarter of the TTL (%v)", o.Work, o.TTL/4)
	case o.Duration < time.Second:
		return o, fmt.Errorf("chaos: duration %v is under a second", o.Duration)
	case sessionErr != nil:
		return o, sessionErr
	case o.Gap < 0:
		return o, fmt.Errorf("chaos: negative gap %v", o.Gap)
	case o.TLS && !TLSBackend(o.Backend):
		return o, fmt.Errorf("chaos: backend %s does not run with TLS; those that do: %v", o.Backend, tlsBackends())
	}
	return o, checkFaults(o.Backend, o.Faults)
}

// Progress is a snapshot of a run for a progress display.
type Progress struct {
	Elapsed, Duration time.Duration
	Grants, Failures  int
	Faults            int
	Fault             string // the fault in force, if any
	// GrantedSinceFault reports whether a grant has been made since the
	// last fault ended, by the time the client took it, not when its
	// report came: a client's report of a grant made before the fault
	// may come after it (a client paused before it wrote one, or slow to).
	GrantedSinceFault bool
}

// A Result is the outcome of a Run.
type Result struct {
	Options     Options // with every default filled in, the seed included
	Verdict     *Verdict
	History     *History
	Interrupted bool     // ctx was done before Duration
	ClientNotes []string // what clients that failed wrote to stderr
}

// Run starts the servers of o.Backend on loopback ports, runs o.Clients
// client processes that contend for one lock through a proxy each, injects
// faults for o.Duration, stops everything, and checks the history. It
// returns an error, matching ErrUnavailable if the servers could not be
// started, only when the run could not take place; what went wrong in the
// run is in the Verdict.
func Run(ctx context.Context, o Options) (*Result, error) {
	o, err := o.resolve()
	if err != nil {
		return nil, err
	}
	h := &History{}
	d, err := startDeployment(o.Backend, o.Clients, o.TLS)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	defer d.close()
	store, err := NewStore(h)
	if err != nil {
		return nil, err
	}
	defer store.Close()

	r := &run{o: o, h: h, holding: map[int]uint64{}}
	name := fmt.Sprintf("chaos-%x", o.Seed&0xffffff)
	for i := range o.Clients {
		cfg := clientConfig{ID: i + 1, Kind: d.kind(), Addrs: d.clientAddrs(i), Name: name, TTL: o.TTL,
			Work: o.Work, Store: store.Addr(), SessionTimeout: o.SessionTimeout, Seed: o.Seed,
			LibraryDefaults: o.LibraryDefaults, Via: d.via(i), TLS: d.clientTLS()}
		p, err := startClient(o.Command, cfg, h, r.observe)
		if err != nil {
			r.stopClients()
			return nil, err
		}
		r.clients = append(r.clients, p)
		go r.watch(p)
	}
	tlsNote := ""
	if o.TLS {
		tlsNote = ", TLS"
	}
	h.Add(Event{Op: OpStart, Value: fmt.Sprintf("%s%s, %d clients, seed %d", o.Backend, tlsNote, o.Clients, o.Seed)})

	// Duration counts from the first grant: on a loaded machine the
	// client processes can take seconds to start and connect (a pair of
	// make test runs saw a Redlock run of 8s end with no grant at all).
	// A run in which no grant comes within firstGrantWait begins then,
	// and says so in its verdict's count of grants.
	r.awaitFirstGrant(ctx, firstGrantWait)
	runCtx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	in := &injector{d: d, hist: h, rng: rand.New(rand.NewPCG(o.Seed, 0)), ttl: o.TTL, session: o.sessionTimeout(),
		name: name, clients: r.clients, holder: r.holder}
	var faults sync.WaitGroup
	faults.Go(func() { r.injectFaults(runCtx, in) })
	if o.Progress != nil {
		faults.Go(func() { r.report(runCtx) })
	}
	<-runCtx.Done()
	faults.Wait()
	interrupted := ctx.Err() != nil

	notes := r.stopClients()
	h.Add(Event{Op: OpFinal, Values: store.Final()})
	h.Add(Event{Op: OpStop})
	v := Check(h, CheckConfig{Backend: o.Backend, Window: o.Window()})
	return &Result{Options: o, Verdict: v, History: h, Interrupted: interrupted, ClientNotes: notes}, nil
}

// run is the state of one Run.
type run struct {
	o       Options
	h       *History
	clients []*clientProc

	mu       sync.Mutex
	holding  map[int]uint64 // client (0-based) -> fence of the lease it holds
	last     int            // the client granted last
	grants   int
	failures int
	faults   int
	fault    string
	stopping bool
	granted  Mono // the latest grant, by the client's clock
	healed   Mono // when the last fault ended; in the future while one is in force
}

// observe follows the clients' events to know who holds the lock.
func (r *run) observe(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := e.Client - 1
	switch e.Op {
	case OpGrant:
		r.holding[c], r.last = e.Fence, c
		r.grants++
		r.granted = max(r.granted, e.At)
	case OpFail:
		r.failures++
	case OpDone, OpRelease:
		if r.holding[c] == e.Fence {
			delete(r.holding, c)
		}
	}
}

// holder returns the client holding the lock (the one granted last, if
// it still holds), or -1.
func (r *run) holder() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.holding[r.last]; ok {
		return r.last
	}
	for c := range r.holding {
		return c
	}
	return -1
}

// firstGrantWait is how long Run waits for the clients' first grant
// before it starts counting the run's Duration anyway.
const firstGrantWait = 30 * time.Second

// awaitFirstGrant waits until a client has been granted the lock, ctx is
// done, or limit has passed.
func (r *run) awaitFirstGrant(ctx context.Context, limit time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for ctx.Err() == nil {
		r.mu.Lock()
		granted := r.grants > 0
		r.mu.Unlock()
		if granted {
			return
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// injectFaults waits for the first grant, then injects faults with a gap
// between them until ctx is done.
func (r *run) injectFaults(ctx context.Context, in *injector) {
	if len(r.o.Faults) == 0 {
		return
	}
	r.awaitFirstGrant(ctx, r.o.Duration)
	s := &schedule{faults: r.o.Faults, random: r.o.Random, rng: in.rng}
	for {
		sleep(ctx, r.o.Gap)
		if ctx.Err() != nil {
			return
		}
		kind := s.pick()
		r.mu.Lock()
		r.faults++
		r.fault = kind
		r.healed = math.MaxInt64
		r.mu.Unlock()
		if err := in.inject(ctx, kind); err != nil {
			r.h.Add(Event{Op: OpLog, Value: err.Error()})
		}
		r.mu.Lock()
		r.fault = ""
		r.healed = Now()
		r.mu.Unlock()
	}
}

// report calls Options.Progress until ctx is done.
func (r *run) report(ctx context.Context) {
	start := time.Now()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		r.mu.Lock()
		p := Progress{Elapsed: time.Since(start), Duration: r.o.Duration, Grants: r.grants,
			Failures: r.failures, Faults: r.faults, Fault: r.fault, GrantedSinceFault: r.faults > 0 && r.granted > r.healed}
		r.mu.Unlock()
		r.o.Progress(p)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// watch records a client that exits before it is told to.
func (r *run) watch(p *clientProc) {
	<-p.done
	r.mu.Lock()
	stopping := r.stopping
	r.mu.Unlock()
	if !stopping {
		r.h.Add(Event{Op: OpCrashed, Client: p.id, Err: fmt.Sprintf("%v: %s", p.err, p.Stderr())})
	}
}

// stopClients stops every client and returns what failing ones wrote.
func (r *run) stopClients() []string {
	r.mu.Lock()
	r.stopping = true
	r.mu.Unlock()
	grace := 2*max(r.o.TTL, r.o.sessionTimeout()) + 5*time.Second
	var wg sync.WaitGroup
	ok := make([]bool, len(r.clients))
	for i, p := range r.clients {
		wg.Go(func() { ok[i] = p.stop(grace) })
	}
	wg.Wait()
	var notes []string
	for i, p := range r.clients {
		if !ok[i] {
			notes = append(notes, fmt.Sprintf("client %d: %v: %s", p.id, p.err, p.Stderr()))
		}
	}
	return notes
}
