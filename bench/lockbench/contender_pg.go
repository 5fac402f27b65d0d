package lockbench

import (
	"context"
	"sync/atomic"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// P1 and P2 contenders: dlock's pglock in both modes, and dlock's
// redislock.Mutex. They run only in P1 and P2, whatever -contenders says.
const (
	PGLeaseName   = "dlock-pg-lease"
	PGSessionName = "dlock-pg-session"
	PGRedisName   = ZKRedisName
)

// PGContenders are P1's and P2's contenders. PostgreSQL ones have OpenPG,
// the Redis one Open.
func PGContenders() []Contender {
	return []Contender{
		{Name: PGLeaseName, OpenPG: func(url string) (Client, error) { return openPG(url, lease) },
			Config: "pglock.Mutex (lease mode: a row per lock, one INSERT … ON CONFLICT … DO UPDATE to acquire, an UPDATE " +
				"… RETURNING pg_notify to release) on its own pglock.Client over its own pgxpool.Pool (pgx v5 defaults: " +
				"max(4, cores) connections, statement cache); `WithTTL(10s)`, renewal on, `Lock` with the default retry " +
				"(LISTEN/NOTIFY release notice + exponential 8–512ms jittered poll, bounded by the holder's expiry). " +
				"One Mutex per Lock call."},
		{Name: PGSessionName, OpenPG: func(url string) (Client, error) { return openPG(url, session) },
			Config: "pglock.SessionMutex (session mode: pg_try_advisory_lock on a pool connection the lease keeps, a fence " +
				"from the sequence, idle_session_timeout set; released with pg_advisory_unlock + pg_notify) on its own " +
				"pglock.Client and pgxpool.Pool as dlock-pg-lease; `WithTTL(10s)`, renewal on, the default retry " +
				"(LISTEN/NOTIFY + exponential 8–512ms jittered poll). One SessionMutex per Lock call."},
		dlockRedisReference(),
	}
}

type pgMode int

const (
	lease pgMode = iota
	session
)

// pgClient is one pglock.Client on its own pool, counting the statements
// its pool sends.
type pgClient struct {
	pool  *pgxpool.Pool
	c     *pglock.Client
	mode  pgMode
	count *statementCounter
}

func openPG(url string, mode pgMode) (Client, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	count := &statementCounter{}
	cfg.ConnConfig.Tracer = count
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return &pgClient{pool: pool, c: pglock.New(pool), mode: mode, count: count}, nil
}

func (p *pgClient) Lock(ctx context.Context, name string) (Release, error) {
	var l dlock.Locker = p.c.NewMutex(name, pglock.WithTTL(LockTTL))
	if p.mode == session {
		l = p.c.NewSessionMutex(name, pglock.WithTTL(LockTTL))
	}
	lease, err := l.Lock(ctx)
	if err != nil {
		return nil, err
	}
	return lease.Release, nil
}

func (p *pgClient) Close() error {
	err := p.c.Close()
	p.pool.Close()
	return err
}

func (p *pgClient) statements() int64 { return p.count.n.Load() }

// statementCounter is a pgx tracer that counts the statements a pool
// sends: every Query, QueryRow and Exec, LISTEN included.
type statementCounter struct{ n atomic.Int64 }

func (s *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	return ctx
}

func (s *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
