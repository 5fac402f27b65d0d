package fencecmd

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
)

// reset sets the resource's record to f with the guard's Reset, and
// leaves a trace of it on stderr: a line that says what the record was
// and is, and the guard's dlock.EventFenceReset, logged as a
// dlock.LogObserver logs it.
func (o options) reset(ctx context.Context, f uint64, spec backend.Spec, streams cmdutil.IO) int {
	obs := dlock.LogObserver(slog.New(slog.NewTextHandler(streams.Err, nil)))
	opts := []fence.Option{fence.WithObserver(obs), fence.WithTable(o.table)}
	var (
		previous uint64
		err      error
		code     = cmdutil.ExitUnavailable
		where    string
	)
	switch {
	case o.file != "":
		where, code = cmdutil.Quote(o.file), cmdutil.ExitError
		if previous, err = fence.ResetFile(o.file, f); err == nil {
			// ResetFile has no observer: the command reports it.
			obs.Observe(dlock.Event{Kind: dlock.EventFenceReset, Name: o.file, Lock: "File", Fence: f, Previous: previous})
		}
	case o.redis != "":
		backend.QuietRedisLogs()
		rdb := redis.NewClient(spec.Redis[0])
		defer rdb.Close()
		where = fmt.Sprintf("%s on redis %s", cmdutil.Quote(o.resource), spec.Redis[0].Addr)
		previous, err = fence.NewRedis(goredisconn.New(rdb), opts...).Reset(ctx, o.resource, f)
		err = refused(err)
	default:
		dialect, db := fence.Postgres, (*sql.DB)(nil)
		if o.postgres != "" {
			db = stdlib.OpenDB(*spec.Postgres.ConnConfig)
			where = fmt.Sprintf("%s in table %s of postgres %s:%d/%s", cmdutil.Quote(o.resource), o.table,
				spec.Postgres.ConnConfig.Host, spec.Postgres.ConnConfig.Port, spec.Postgres.ConnConfig.Database)
		} else {
			backend.QuietMySQLLogs()
			conn, cerr := mysql.NewConnector(spec.MySQL)
			if cerr != nil {
				return cmdutil.Fail(streams, cmdutil.Usagef("dlock fence reset: --mysql: %v", cerr), cmdutil.ExitUsage)
			}
			dialect, db = fence.MySQL, sql.OpenDB(conn)
			where = fmt.Sprintf("%s in table %s of mysql %s/%s", cmdutil.Quote(o.resource), o.table, spec.MySQL.Addr, spec.MySQL.DBName)
		}
		defer db.Close()
		g := fence.NewSQL(dialect, opts...)
		if err = g.Migrate(ctx, db); err == nil {
			previous, err = g.Reset(ctx, db, o.resource, f)
		}
		if r := backend.Refused(err); err != nil && cmdutil.IsUsage(r) {
			err = r
		} else if err != nil {
			err = denied(err, o.table)
		}
	}
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock fence reset: %w", err), code)
	}
	fmt.Fprintf(streams.Err, "dlock fence reset: the newest fence of %s was %d, is now %d\n", where, previous, f)
	return cmdutil.ExitOK
}
