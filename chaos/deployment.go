package chaos

import (
	"errors"
	"fmt"
	"os"

	"github.com/dlock-go/dlock/internal/servers"
)

// A deployment is the servers of one backend, started by the harness on
// loopback ports, and a proxy per client and server, through which the
// client reaches the server: the way to delay or cut one client or one
// server off.
type deployment struct {
	backend string
	svc     *service
	// nodes are the servers, in the order reports number them; start
	// fills them in. closers stop them, in order, after the proxies.
	nodes   []node
	closers []func() error
	// state is what the service keeps of its servers beside nodes (an
	// ensemble, a cluster), for its own file only.
	state any
	// redis are the Redis servers of Redis, Redlock and Sentinel.
	redis []*servers.Redis
	// With TLS: the certificates, and the TLS address of each Redis
	// server, which clients reach instead of its plain one.
	certs    *servers.Certs
	certsDir string
	tlsAddrs []string
	links    []*servers.Proxy   // Sentinel: in front of each data server, for replication and the Sentinels
	proxies  [][]*servers.Proxy // [client][server]
}

// A node is one server of a deployment: the process the faults act on,
// and the address the proxies forward to.
type node struct {
	addr string
	proc server
}

// server is what the faults do to one server process.
type server interface {
	Kill() error
	Restart() error
	Pause() error
	Resume() error
}

// startDeployment starts the servers of backend and the proxies of the
// given number of clients; with useTLS, servers that clients reach
// through TLS only (see TLSBackend).
func startDeployment(backend string, clients int, useTLS bool) (*deployment, error) {
	s := serviceOf(backend)
	if s == nil {
		return nil, fmt.Errorf("chaos: unknown backend %q; use one of %v", backend, Backends)
	}
	d := &deployment{backend: backend, svc: s}
	if useTLS {
		if err := d.startTLS(); err != nil {
			d.close()
			return nil, err
		}
	}
	if err := s.start(d, clients); err != nil {
		d.close()
		return nil, err
	}
	for range clients {
		var row []*servers.Proxy
		for i := range d.servers() {
			p, err := servers.NewProxy(d.addr(i))
			if err != nil {
				d.close()
				return nil, fmt.Errorf("chaos: proxy: %w", err)
			}
			row = append(row, p)
		}
		d.proxies = append(d.proxies, row)
	}
	return d, nil
}

// kind is the kind of lock service, as clients know it.
func (d *deployment) kind() string {
	if d.svc.client != "" {
		return d.svc.client
	}
	return d.backend
}

func (d *deployment) servers() int { return len(d.nodes) }

func (d *deployment) addr(i int) string { return d.nodes[i].addr }

// name names server i for reports: "node 2 (127.0.0.1:41234)".
func (d *deployment) name(i int) string { return fmt.Sprintf("node %d (%s)", i+1, d.addr(i)) }

// clientAddrs returns the proxy addresses client c (0-based) connects to:
// on Sentinel, those of the Sentinels (see via for the rest).
func (d *deployment) clientAddrs(c int) []string {
	addrs := make([]string, len(d.proxies[c]))
	for i, p := range d.proxies[c] {
		addrs[i] = p.Addr()
	}
	return addrs[d.svc.clientFrom:]
}

// via maps the addresses the servers hand out to client c's proxies to
// those servers; nil but on Sentinel and Cluster.
func (d *deployment) via(c int) map[string]string {
	if d.svc.via == nil {
		return nil
	}
	return d.svc.via(d, c)
}

func (d *deployment) server(i int) server { return d.nodes[i].proc }

// serverProxies returns every client's proxy to server i.
func (d *deployment) serverProxies(i int) []*servers.Proxy {
	ps := make([]*servers.Proxy, len(d.proxies))
	for c, row := range d.proxies {
		ps[c] = row[i]
	}
	return ps
}

// close stops every proxy and server.
func (d *deployment) close() error {
	var errs []error
	for _, row := range d.proxies {
		for _, p := range row {
			errs = append(errs, p.Close())
		}
	}
	for _, c := range d.closers {
		errs = append(errs, c())
	}
	if d.certsDir != "" {
		errs = append(errs, os.RemoveAll(d.certsDir))
	}
	return errors.Join(errs...)
}
