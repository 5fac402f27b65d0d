package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/servers"
	"github.com/dlock-go/dlock/zklock"
)

// A ZooKeeper ensemble of three: zklock.Mutex, on a Session each client.
var _ = register(&service{
	backends: []string{BackendZK3},
	client:   "zookeeper",
	needs:    "ZooKeeper", pkg: "zookeeper", look: servers.LookZooKeeper,
	tls: true,
	checkSession: func(timeout time.Duration) error {
		if timeout < 400*time.Millisecond {
			return fmt.Errorf("chaos: session timeout %v is under ZooKeeper's minimum of 400ms (two ticks)", timeout)
		}
		return nil
	},
	start: func(d *deployment, _ int) error {
		if err := servers.LookZooKeeper(); err != nil {
			return err
		}
		var z *servers.Ensemble
		var err error
		if d.certs != nil {
			z, err = servers.LaunchEnsembleTLS(3, d.certs, true)
		} else {
			z, err = servers.LaunchEnsemble(3)
		}
		if err != nil {
			return err
		}
		d.state = z
		d.closers = append(d.closers, func() error {
			for _, s := range z.Servers {
				s.Resume()
			}
			return z.Close()
		})
		for _, s := range z.Servers {
			addr := s.Addr()
			if d.certs != nil {
				addr = s.TLSAddr()
			}
			d.nodes = append(d.nodes, node{addr: addr, proc: s})
		}
		return nil
	},
	connect: func(c *client, ctx context.Context, _ time.Duration) (dlock.Locker, func(), error) {
		cfg := c.cfg
		opts := []zklock.ClientOption{zklock.WithSessionTimeout(cfg.SessionTimeout), zklock.WithObserver(c)}
		if cfg.TLS != nil {
			tc, err := cfg.TLS.config()
			if err != nil {
				return nil, nil, fmt.Errorf("TLS: %w", err)
			}
			opts = append(opts, zklock.WithTLS(tc), zklock.WithDigestAuth(cfg.TLS.User, cfg.TLS.Password))
		}
		s, err := zklock.New(ctx, cfg.Addrs, opts...)
		if err != nil {
			return nil, nil, err
		}
		return s.NewMutex("/dlock-chaos/"+cfg.Name, zklock.WithTTL(cfg.TTL)), func() { s.Close() }, nil
	},
	faults: map[string][]string{BackendZK3: {FaultKillEmpty, FaultClientPause, FaultLeaderKill, FaultSession,
		FaultKill, FaultPause, FaultBlackhole, FaultLatency, FaultReset, FaultKillEmptyAll}},
	injects: map[string]injectFunc{FaultKillEmptyAll: injectKillEmptyAll},
	restartEmpty: func(d *deployment, i int) error {
		return ensemble(d).Servers[i].RestartEmpty()
	},
	leader: func(d *deployment) (int, error) {
		z := ensemble(d)
		l, err := z.Leader()
		if err != nil {
			return 0, err
		}
		for i, s := range z.Servers {
			if s == l {
				return i, nil
			}
		}
		return 0, errors.New("chaos: the leader is not a member")
	},
})

// ensemble returns the ZooKeeper ensemble of d.
func ensemble(d *deployment) *servers.Ensemble { return d.state.(*servers.Ensemble) }

// injectKillEmptyAll plans FaultKillEmptyAll: kill -9 every member of the
// ensemble, and restart them all without their data.
func injectKillEmptyAll(in *injector, ctx context.Context, f *injection) error {
	z := ensemble(in.d)
	f.target = "every node"
	f.hold = in.between(in.ttl/10, in.ttl)
	in.awaitHolder(ctx) // an ensemble that forgets a free lock shows nothing
	f.apply = func() error {
		var errs []error
		for _, s := range z.Servers {
			errs = append(errs, s.Kill())
		}
		return errors.Join(errs...)
	}
	f.heal = z.RestartEmpty
	return nil
}
