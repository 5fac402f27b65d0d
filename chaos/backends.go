package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dlock-go/dlock"
)

// A service is one kind of lock service the harness runs, and the
// backends (Backends) that run it. Each service registers one, in its own
// file, with register; the harness reaches servers and clients only
// through it, so that starting a deployment, connecting a client and
// injecting a fault have no arm per backend.
type service struct {
	// backends are the backends that run the service, each a
	// configuration of its servers or its client.
	backends []string
	// client is the Kind its clients are told ("zookeeper"); "": each
	// backend's own name, which its connect tells apart.
	client string
	// needs names what the service runs on, for messages ("ZooKeeper",
	// "redis-server"), and pkg the Debian package that has it; look
	// returns an error if it is not installed.
	needs, pkg string
	look       func() error
	// tls: the service runs with Options.TLS (see TLSBackend); its
	// start and connect then use d.certs and clientConfig.TLS.
	tls bool
	// checkSession, for a service whose clients hold sessions of
	// Options.SessionTimeout (ZooKeeper), returns an error for a
	// timeout the service does not take; nil: no sessions.
	checkSession func(timeout time.Duration) error

	// start starts the servers of d.backend, filling in d.nodes, and
	// adds to d.closers what stops them, even when it fails half-way;
	// clients is the number of clients to come.
	start func(d *deployment, clients int) error
	// connect makes the lock client c contends for, through its proxies,
	// and what closes it; opTimeout bounds one operation.
	connect func(c *client, ctx context.Context, opTimeout time.Duration) (dlock.Locker, func(), error)
	// clientFrom is the first server clients are given the address of
	// (Sentinel: the Sentinels); via, if not nil, maps the addresses the
	// servers hand out to client c's proxies (see clientConfig.Via).
	clientFrom int
	via        func(d *deployment, c int) map[string]string

	// faults are FaultsFor each backend. injects plan the faults that
	// are the service's own (FaultTerminate on PostgreSQL); inject plans
	// the others the same way on every backend. restartEmpty restarts
	// killed server i without its data (FaultKillEmpty), leader returns
	// the index of the leader (FaultLeaderKill); nil: the service has
	// no such fault.
	faults       map[string][]string
	injects      map[string]injectFunc
	restartEmpty func(d *deployment, i int) error
	leader       func(d *deployment) (int, error)
	// recordsAs maps a fault to the fault a history may record after it,
	// for an injection that inject records under another name (Redlock:
	// FaultExpire, FaultExpireBare).
	recordsAs map[string]string
	// splitBrain reports whether fault on backend can leave two masters
	// granting the lock at once; expect returns why fault on backend may
	// cause a violation of kind k beyond what Expect excuses on every
	// backend, or "". nil: never.
	splitBrain func(backend, fault string) bool
	expect     func(backend, fault string, k Kind) string
}

// An injectFunc plans fault f on in's deployment: it sets f's apply and
// heal, and changes its target, node, hold or kind where they differ from
// the defaults inject gave.
type injectFunc func(in *injector, ctx context.Context, f *injection) error

// services are the registered services.
var services []*service

// register adds s to the services the harness runs. Each service's file
// calls it once, from a package-level variable's initialiser.
func register(s *service) *service {
	if len(s.backends) == 0 || s.start == nil || s.connect == nil || s.look == nil {
		panic(fmt.Sprintf("chaos: incomplete service %v", s.backends))
	}
	for _, b := range s.backends {
		if serviceOf(b) != nil || s.faults[b] == nil {
			panic("chaos: backend " + b + " registered twice, or without its faults")
		}
	}
	services = append(services, s)
	return s
}

// serviceOf returns the service that runs backend, or nil.
func serviceOf(backend string) *service {
	for _, s := range services {
		if slices.Contains(s.backends, backend) {
			return s
		}
	}
	return nil
}

// tlsBackends returns the backends that run with Options.TLS, in the
// order of Backends.
func tlsBackends() []string {
	var bs []string
	for _, b := range Backends {
		if s := serviceOf(b); s != nil && s.tls {
			bs = append(bs, b)
		}
	}
	return bs
}

// serviceOfClient returns the service whose clients are told kind, or nil.
func serviceOfClient(kind string) *service {
	for _, s := range services {
		if s.client == kind || s.client == "" && slices.Contains(s.backends, kind) {
			return s
		}
	}
	return nil
}

// Needs returns what backend's servers run on ("ZooKeeper", "redis-server")
// and the Debian package that has it, and an error if it is not
// installed. It returns an error, and no names, for a backend not in
// Backends.
func Needs(backend string) (server, pkg string, err error) {
	s := serviceOf(backend)
	if s == nil {
		return "", "", fmt.Errorf("chaos: unknown backend %q; use one of %v", backend, Backends)
	}
	return s.needs, s.pkg, s.look()
}
