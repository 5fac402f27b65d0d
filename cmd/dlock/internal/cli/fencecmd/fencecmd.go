// Package fencecmd implements "dlock fence": the fence checks of package
// fence, for shell scripts that write under "dlock run".
package fencecmd

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
)

// ExitStale is the exit code of a stale fence: a later holder of the lock
// has written to the resource. It is EX_NOPERM of sysexits.h.
const ExitStale = 77

// Timeout bounds one check or write.
const Timeout = 30 * time.Second

// EnvFence is where the fence comes from without --fence: "dlock run"
// sets it for its COMMAND.
const EnvFence = "DLOCK_FENCE"

// Usage is the help text of "dlock fence".
const Usage = `Usage: dlock fence check [flags]     (--file PATH | --postgres URL --resource R | --mysql DSN --resource R | --redis URL --resource KEY)
       dlock fence write [flags] < DATA  (--file PATH | --redis URL --resource KEY)
       dlock fence reset --fence N --yes (as check)

Guards a resource with the fence of the lease under which a script
writes: the fence from --fence, or from $DLOCK_FENCE, which "dlock run"
sets for its COMMAND. A fence lower than one the resource has accepted is
stale: a later holder of the lock has written, and this one must not.

check records the fence as the resource's newest, unless a higher one is
recorded: for a file in PATH.fence, beside it (under an exclusive flock);
for PostgreSQL or MySQL/MariaDB in the table dlock_fences (created if
missing, which needs CREATE; --table names another), row R; for Redis in the key that package fence keeps
beside KEY. Writes made after a check are not guarded by it: prefer
write where it fits.

write reads DATA from standard input and, unless the fence is stale,
replaces the file PATH (not a symbolic link: exit 64) with it (through a
temporary file and a rename) or
sets the Redis string KEY to it, in one step with the check. It refuses
empty input without --allow-empty, and a terminal on standard input: run
the producer into a temporary file first, so that one that fails replaces
nothing, and use "sh -e" so that a stale fence (77) stops the script.

A guard trusts the fences it is given: one check with a forged fence of
2^63-1 makes every real holder's fence stale from then on. --max-jump N
refuses (77) a fence more than N above the newest the resource accepted
(Redis, PostgreSQL, MySQL; choose N above the largest jump a real holder
brings: fences of Redis, Redlock, PostgreSQL and MySQL locks follow the
clock in microseconds, so N = 2^40 allows 12.7 days between writes).
reset is the operator's way out: it sets the resource's record to N,
even lower than it is, 0 forgetting the resource, and writes on stderr
what the record was and is, and the guard's fence-reset event as a log
line. It lets in every write with a fence from N up: give the lock's
latest fence, which "dlock inspect" shows, so that a holder the lock has
since replaced stays stale. It needs --yes.

Redis must write every write to disk before it answers (appendonly yes,
appendfsync always): a server that restarts without the fences it kept
lets a stale write through, so a server that does not, that may evict
keys without a TTL (maxmemory-policy allkeys-...), or that refuses
CONFIG GET, is exit 64, unless --accept-fence-loss takes the risk.
Likewise a MySQL or MariaDB server whose innodb_flush_log_at_trx_commit
is not 1; on PostgreSQL, check asks for a synchronous commit.

Without --file, --postgres, --mysql or --redis, the database comes from
$DLOCK_POSTGRES, $DLOCK_MYSQL or $DLOCK_REDIS (one URL). A URL or DSN
without a password takes one from --password-file (the file's first
line), or for Redis from $DLOCK_REDIS_PASSWORD: a password in a flag is on
the command line, which every user can read. Under "dlock run", use
--password-file: run keeps the DLOCK_ variables from its COMMAND, so that
the lock server's password does not reach every process COMMAND starts;
a file, readable only by the account that runs the script, is read only
by the command that needs it. A refused password is exit 64.

Exit codes: 0 the fence is current (and DATA written), or reset;
77 the fence is stale, or more than --max-jump above the newest, nothing
written; 64 bad usage, a missing or malformed fence,
empty (without --allow-empty) or terminal input, a password the server
refuses, a key that holds another type, or a Redis that does not
persist every write;
69 the database or Redis cannot be reached or failed; 1 the file could
not be written.

Flags:
`

type options struct {
	verb     string
	fence    string
	file     string
	postgres string
	mysql    string
	redis    string
	resource string
	table    string
	// allowEmpty lets write store empty input, which is otherwise
	// refused: a producer that failed often writes nothing.
	allowEmpty bool
	// passwordFile holds the Redis password: "dlock run" keeps
	// $DLOCK_REDIS_PASSWORD from its COMMAND.
	passwordFile string
	// acceptLoss lets --redis use a server that does not persist every
	// write (fence.AcceptFenceLoss).
	acceptLoss bool
	// maxJump refuses a fence more than this above the newest
	// (fence.WithMaxJump); 0: no bound.
	maxJump uint64
	// yes confirms a reset.
	yes bool
}

func flagSet(o *options) *flag.FlagSet {
	fs := cmdutil.NewFlagSet("dlock fence")
	fs.StringVar(&o.fence, "fence", "", "the fence, a decimal number (default $"+EnvFence+"); reset: the new record, 0 to forget the resource")
	fs.StringVar(&o.file, "file", "", "the file to guard")
	fs.StringVar(&o.postgres, "postgres", "", "PostgreSQL URL of the database that keeps the fences (env "+backend.EnvPostgres+")")
	fs.StringVar(&o.mysql, "mysql", "", "MySQL or MariaDB DSN, user:password@tcp(host:port)/db, of the database that keeps the fences (env "+backend.EnvMySQL+")")
	fs.StringVar(&o.redis, "redis", "", "Redis URL, redis://[user:password@]host:port[/db] or rediss:// (env "+backend.EnvRedis+", one URL)")
	fs.StringVar(&o.resource, "resource", "", "the resource: a name for --postgres, a key for --redis")
	fs.StringVar(&o.table, "table", fence.DefaultTable, "the table of fences, with --postgres or --mysql")
	fs.StringVar(&o.passwordFile, "password-file", "", "read the password of Redis, PostgreSQL or MySQL from this file's first line, for a URL or DSN that carries none, so that it is not on the command line, which every user can read")
	fs.BoolVar(&o.allowEmpty, "allow-empty", false, "write: store empty input (refused without it)")
	fs.Uint64Var(&o.maxJump, "max-jump", 0, "check, write: refuse (77) a fence more than this above the newest the resource accepted, as no holder of the lock could have it (fence.WithMaxJump; Redis, PostgreSQL, MySQL); default 0: no bound")
	fs.BoolVar(&o.yes, "yes", false, "reset: required, to confirm")
	fs.BoolVar(&o.acceptLoss, "accept-fence-loss", false, "use a Redis server that does not persist every write, or a MySQL server that does not flush every commit, which can forget fences in a crash and then let a stale write through")
	return fs
}

// parse returns the options of args, with the fence resolved from
// getenv.
func parse(args []string, getenv func(string) string) (options, uint64, error) {
	var o options
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		o.verb, args = args[0], args[1:]
	}
	fs := flagSet(&o)
	pos, err := cmdutil.Parse(fs, args)
	if err != nil {
		return o, 0, err
	}
	switch {
	case o.verb == "":
		return o, 0, cmdutil.Usagef("dlock fence: missing check, write or reset")
	case o.verb != "check" && o.verb != "write" && o.verb != "reset":
		return o, 0, cmdutil.Usagef("dlock fence: %q is not check, write or reset", o.verb)
	case len(pos) > 0:
		return o, 0, cmdutil.Usagef("dlock fence %s: unexpected argument %q; the resource comes from --file, or --resource with --postgres, --mysql or --redis", o.verb, pos[0])
	}
	n := 0
	for _, s := range []string{o.file, o.postgres, o.mysql, o.redis} {
		if s != "" {
			n++
		}
	}
	if n == 0 {
		// As the other commands, dlock fence takes its database from
		// the environment, where a password is not on the command line.
		for _, e := range []struct {
			p   *string
			env string
		}{{&o.postgres, backend.EnvPostgres}, {&o.mysql, backend.EnvMySQL}, {&o.redis, backend.EnvRedis}} {
			if v := getenv(e.env); v != "" {
				*e.p = v
				n++
			}
		}
		if n > 1 {
			return o, 0, cmdutil.Usagef("dlock fence %s: more than one of $%s, $%s and $%s is set; give --postgres, --mysql or --redis", o.verb, backend.EnvPostgres, backend.EnvMySQL, backend.EnvRedis)
		}
		if urls := backend.SplitURLs(o.redis); len(urls) > 1 {
			return o, 0, cmdutil.Usagef("dlock fence %s: $%s holds %d Redis URLs; dlock fence takes one Redis server: give --redis URL", o.verb, backend.EnvRedis, len(urls))
		}
	}
	switch {
	case n != 1:
		return o, 0, cmdutil.Usagef("dlock fence %s: give one of --file PATH, --postgres URL, --mysql DSN or --redis URL (or set $%s, $%s or $%s)", o.verb, backend.EnvPostgres, backend.EnvMySQL, backend.EnvRedis)
	case o.file != "" && o.resource != "":
		return o, 0, cmdutil.Usagef("dlock fence %s: --resource goes with --postgres, --mysql or --redis, not --file", o.verb)
	case o.file == "" && o.resource == "":
		return o, 0, cmdutil.Usagef("dlock fence %s: missing --resource", o.verb)
	case o.passwordFile != "" && o.file != "":
		return o, 0, cmdutil.Usagef("dlock fence %s: --password-file goes with --redis, --postgres or --mysql", o.verb)
	case o.acceptLoss && o.redis == "" && o.mysql == "" && o.postgres == "":
		return o, 0, cmdutil.Usagef("dlock fence %s: --accept-fence-loss goes with --redis, --mysql or --postgres", o.verb)
	case o.verb != "write" && o.allowEmpty:
		return o, 0, cmdutil.Usagef("dlock fence %s: --allow-empty goes with write", o.verb)
	case o.verb != "reset" && o.yes:
		return o, 0, cmdutil.Usagef("dlock fence %s: --yes goes with reset", o.verb)
	case o.maxJump > 0 && o.file != "":
		return o, 0, cmdutil.Usagef("dlock fence %s: --max-jump goes with --redis, --postgres or --mysql; a --file guard takes no bound", o.verb)
	case o.verb == "reset" && (o.maxJump > 0 || o.acceptLoss):
		return o, 0, cmdutil.Usagef("dlock fence reset: --max-jump and --accept-fence-loss go with check and write")
	case o.verb == "write" && (o.postgres != "" || o.mysql != ""):
		return o, 0, cmdutil.Usagef("dlock fence write: takes --file or --redis; with a database, write in SQL after check in one transaction, or use package fence")
	}
	if err := o.checkResource(); err != nil {
		return o, 0, err
	}
	if o.verb == "reset" {
		return o.parseReset()
	}
	src, what := o.fence, "--fence"
	if src == "" {
		src, what = getenv(EnvFence), "$"+EnvFence
	}
	if src == "" {
		return o, 0, cmdutil.Usagef("dlock fence %s: no fence: give --fence N or run under dlock run, which sets $%s", o.verb, EnvFence)
	}
	f, err := fence.Parse(src)
	if err != nil {
		return o, 0, cmdutil.Usagef("dlock fence %s: %s is %q: want the lease's fence, a decimal number from 1 to 2^63-1", o.verb, what, src)
	}
	return o, f, nil
}

// parseReset returns the new record that reset's --fence gives: a fence
// from 0 (forget the resource) to 2^63-1. It does not come from
// $DLOCK_FENCE, and --yes must confirm it.
func (o options) parseReset() (options, uint64, error) {
	if o.fence == "" {
		return o, 0, cmdutil.Usagef("dlock fence reset: give --fence N, the new record: the lock's latest fence, which dlock inspect shows, or 0 to forget the resource")
	}
	f, err := strconv.ParseUint(o.fence, 10, 64)
	if err != nil || f > math.MaxInt64 {
		return o, 0, cmdutil.Usagef("dlock fence reset: --fence is %q: want the new record, a decimal number from 0 (forget the resource) to 2^63-1", o.fence)
	}
	if !o.yes {
		return o, 0, cmdutil.Usagef("dlock fence reset: a reset lets in every write with a fence from %d up, including a holder's the lock has since replaced if %d is below the lock's latest fence (dlock inspect shows it); add --yes to confirm", f, f)
	}
	return o, f, nil
}

// Main runs "dlock fence" with args and returns the exit code.
func Main(args []string, streams cmdutil.IO) int {
	o, f, err := parse(args, streams.Getenv)
	if errors.Is(err, cmdutil.ErrHelp) {
		var o options
		cmdutil.PrintUsage(streams.Out, Usage, flagSet(&o))
		return cmdutil.ExitOK
	}
	if err != nil {
		return cmdutil.Fail(streams, err, cmdutil.ExitUsage)
	}
	var spec backend.Spec
	if o.file == "" {
		if spec, err = o.resolve(streams.Getenv); err != nil {
			return cmdutil.Fail(streams, fmt.Errorf("dlock fence %s: %w", o.verb, err), cmdutil.ExitUsage)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if o.verb == "reset" {
		return o.reset(ctx, f, spec, streams)
	}
	code, err := o.run(ctx, f, streams.In, spec)
	if errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrTooHigh) {
		fmt.Fprintf(streams.Err, "dlock fence %s: %v\n", o.verb, err)
		return ExitStale
	}
	if err != nil {
		return cmdutil.Fail(streams, fmt.Errorf("dlock fence %s: %w", o.verb, err), code)
	}
	return cmdutil.ExitOK
}

// run checks or writes, and returns the exit code of its error.
func (o options) run(ctx context.Context, f uint64, in io.Reader, spec backend.Spec) (int, error) {
	switch {
	case o.file != "":
		if o.verb == "check" {
			return cmdutil.ExitError, fence.CheckFile(o.file, f)
		}
		if fi, err := os.Lstat(o.file); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			// Renaming over the link would replace it with a regular
			// file, and the fence file would guard the link, not what
			// other writers reach through another path.
			return cmdutil.ExitUsage, cmdutil.Usagef("--file %s is a symbolic link: give the path of the file it points to", cmdutil.Quote(o.file))
		}
		data, err := o.readData(in)
		if err != nil {
			return cmdutil.ExitError, err
		}
		perm := os.FileMode(0o644)
		if fi, err := os.Stat(o.file); err == nil {
			perm = fi.Mode().Perm()
		}
		return cmdutil.ExitError, fence.WriteFile(o.file, f, data, perm)
	case o.postgres != "":
		db := stdlib.OpenDB(*spec.Postgres.ConnConfig)
		defer db.Close()
		return o.checkSQL(ctx, fence.Postgres, db, f)
	case o.mysql != "":
		backend.QuietMySQLLogs()
		conn, err := mysql.NewConnector(spec.MySQL)
		if err != nil {
			return cmdutil.ExitUsage, cmdutil.Usagef("--mysql: %v", err)
		}
		db := sql.OpenDB(conn)
		defer db.Close()
		return o.checkSQL(ctx, fence.MySQL, db, f)
	default:
		return o.redisWrite(ctx, f, in, spec)
	}
}

// readData reads what write stores: all of standard input, which must
// not be a terminal, and must not be empty without --allow-empty.
func (o options) readData(in io.Reader) ([]byte, error) {
	if cmdutil.IsTerminal(in) {
		return nil, cmdutil.Usagef("standard input is a terminal: give the data on it, as in dlock fence write ... < FILE")
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	if len(data) == 0 && !o.allowEmpty {
		return nil, cmdutil.Usagef("standard input is empty, so nothing was written (a producer that failed often writes nothing); add --allow-empty to store empty data")
	}
	return data, nil
}

// resolve checks the --redis, --postgres or --mysql input as the other
// commands do (their messages hide the password), with the password from
// --password-file or, for a Redis URL, $DLOCK_REDIS_PASSWORD, for an
// input that carries none; the other connection variables do not apply.
func (o options) resolve(getenv func(string) string) (backend.Spec, error) {
	bf := backend.Flags{Postgres: o.postgres, MySQL: o.mysql, PasswordFile: o.passwordFile}
	if o.redis != "" {
		bf.Redis.Set(o.redis)
	}
	return bf.Resolve(func(k string) string {
		if k == backend.EnvRedisPassword {
			return getenv(k)
		}
		return ""
	})
}

// refused turns a Redis server's refusal of the password, or of the key
// (another type of value), into a usage error that says what to fix.
func refused(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case errors.Is(err, fence.ErrNotPersistent):
		// The library's advice names its option; this command's is a flag.
		msg, _, _ = strings.Cut(cmdutil.Reason(err), ", or give NewRedis")
		return cmdutil.Usagef("%s, or give --accept-fence-loss to take the risk", msg)
	case strings.Contains(msg, "NOAUTH"):
		return cmdutil.Usagef("%s: the server wants a password; give it in --password-file, in $%s (which dlock run keeps from its COMMAND) or in the URL (redis://:PASSWORD@host:port)", cmdutil.Reason(err), backend.EnvRedisPassword)
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "invalid password"):
		return cmdutil.Usagef("%s: the server refused the password; check the URL's, --password-file's or $%s", cmdutil.Reason(err), backend.EnvRedisPassword)
	case strings.Contains(msg, "WRONGTYPE"):
		return cmdutil.Usagef("%s: --resource names a key that holds another type of value; write holds a string", cmdutil.Reason(err))
	}
	return err
}

// checkSQL records the fence in the database's table, as a Store does:
// what it guards is outside the database, so the fence must survive a
// crash of the server once check has said it passed.
func (o options) checkSQL(ctx context.Context, dialect fence.Dialect, db *sql.DB, f uint64) (int, error) {
	opts := []fence.Option{fence.WithTable(o.table)}
	if o.acceptLoss {
		opts = append(opts, fence.AcceptFenceLoss())
	}
	if o.maxJump > 0 {
		opts = append(opts, fence.WithMaxJump(o.maxJump))
	}
	g := fence.NewSQL(dialect, opts...)
	if err := g.Migrate(ctx, db); err != nil {
		if r := backend.Refused(err); cmdutil.IsUsage(r) {
			return cmdutil.ExitUsage, r
		}
		return cmdutil.ExitUnavailable, denied(err, o.table)
	}
	err := g.Store(db).Advance(ctx, o.resource, f)
	if errors.Is(err, fence.ErrNotPersistent) {
		msg, _, _ := strings.Cut(cmdutil.Reason(err), ", or make the guard with")
		return cmdutil.ExitUnavailable, cmdutil.Usagef("%s, or give --accept-fence-loss to take the risk", msg)
	}
	return cmdutil.ExitUnavailable, denied(err, o.table)
}

func (o options) redisWrite(ctx context.Context, f uint64, in io.Reader, spec backend.Spec) (int, error) {
	backend.QuietRedisLogs()
	rdb := redis.NewClient(spec.Redis[0])
	defer rdb.Close()
	var opts []fence.Option
	if o.acceptLoss {
		opts = append(opts, fence.AcceptFenceLoss())
	}
	if o.maxJump > 0 {
		opts = append(opts, fence.WithMaxJump(o.maxJump))
	}
	g := fence.NewRedis(goredisconn.New(rdb), opts...)
	if o.verb == "check" {
		return cmdutil.ExitUnavailable, refused(g.Check(ctx, o.resource, f))
	}
	data, err := o.readData(in)
	if err != nil {
		return cmdutil.ExitError, err
	}
	return cmdutil.ExitUnavailable, refused(g.Set(ctx, o.resource, f, string(data)))
}

// denied turns a privilege the database account lacks into a usage
// error that names the grants the check needs.
func denied(err error, table string) error {
	if d := backend.Denied(err); cmdutil.IsUsage(d) {
		return cmdutil.Usagef("%s (grant the account SELECT, INSERT and UPDATE on %s; creating it, if it is missing, needs CREATE)", cmdutil.Reason(err), table)
	}
	return err
}

// table is a table name that package fence takes: no quoting needed.
var table = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// checkResource returns a usage error if --resource or --table is not one
// the guard takes.
func (o options) checkResource() error {
	switch {
	case (o.postgres != "" || o.mysql != "") && !table.MatchString(o.table):
		return cmdutil.Usagef("dlock fence %s: --table %q is not letters, digits and underscores, with at most one dot", o.verb, o.table)
	case (o.postgres != "" || o.mysql != "") && (len(o.resource) > 255 || !utf8.ValidString(o.resource)):
		return cmdutil.Usagef("dlock fence %s: --resource must be valid UTF-8 of at most 255 bytes", o.verb)
	case o.redis != "":
		if _, err := fence.RedisKey(o.resource); err != nil {
			return cmdutil.Usagef("dlock fence %s: --resource: %v", o.verb, err)
		}
	}
	return nil
}

// FlagSet returns the flags of dlock fence, for the completion scripts.
func FlagSet() *flag.FlagSet { return flagSet(new(options)) }
