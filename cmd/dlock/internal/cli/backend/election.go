package backend

import (
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/mysqllock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redlock"
	"github.com/dlock-go/dlock/zklock"
)

// Election returns the election called name, whose leader holds a mutex
// of that name for ttl at a time, renewed while it leads.
func (t *Target) Election(name string, ttl time.Duration) (dlock.Election, error) {
	switch {
	case t.single != nil:
		return t.single.NewElection(name, redislock.WithTTL(ttl)), nil
	case t.quorum != nil:
		return t.quorum.NewElection(name, redlock.WithTTL(ttl)), nil
	case t.pg != nil:
		if t.spec.Session {
			return nil, cmdutil.Usagef("--session is not available for elections; a PostgreSQL election uses a lease-mode mutex")
		}
		return t.pg.NewElection(name, pglock.WithTTL(ttl)), nil
	case t.my != nil:
		if t.spec.Session {
			return nil, cmdutil.Usagef("--session is not available for elections; a MySQL election uses a lease-mode mutex")
		}
		return t.my.NewElection(name, mysqllock.WithTTL(ttl)), nil
	case t.etcd != nil:
		return t.etcd.NewElection(name, etcdlock.WithTTL(ttl)), nil
	case t.zk != nil:
		return t.zk.NewElection(ZKPath(name), zklock.WithTTL(ttl)), nil
	}
	return nil, cmdutil.Usagef("no lock service given")
}
