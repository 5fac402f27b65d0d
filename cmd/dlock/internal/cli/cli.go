// Package cli implements the dlock command. Main dispatches to one package
// per subcommand (run, elect, inspect, release, list, bench, demo); each parses its own
// flags, writes to injected streams and returns an exit code, so that tests
// can drive it without a process.
package cli

import (
	"fmt"
	"io"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/bench"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/chaos"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/demo"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/fencecmd"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/inspect"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/run"
)

const usage = `dlock: distributed locks on Redis, Redlock, ZooKeeper, PostgreSQL, MySQL and etcd.

Usage:
  dlock run [flags] NAME -- COMMAND [ARGS...]   run COMMAND while holding the lock NAME
  dlock run [flags] NAME                        hold the lock NAME until SIGINT or SIGTERM
  dlock elect [flags] NAME -- COMMAND [ARGS...] run COMMAND only while leading the election NAME
  dlock elect --leader [flags] NAME             print the current leader of the election NAME
  dlock elect --observe [flags] NAME            print each new leader of NAME until a signal
  dlock inspect [flags] NAME                    show who holds NAME, its fence, TTL and waiters
                                                (--json; --exit-status: 0 held, 3 free)
  dlock release --force [--yes] [flags] NAME    remove every holder of NAME and wake its waiters
                                                (and its --once-per record)
  dlock list [flags] [PREFIX]                   list the held locks whose names start with PREFIX
  dlock fence check|write [flags]               refuse a script's write with a stale fence ($DLOCK_FENCE)
  dlock fence reset --fence N --yes [flags]     set a resource's newest fence, even lower (an operator's)
  dlock schema postgres|mysql [--table NAME]    print the SQL of the tables dlock keeps in a database
  dlock bench [flags]                           measure lock throughput and latency on a deployment
  dlock chaos [flags]                           torture local servers with faults and check the locks held
  dlock demo [flags]                            start local servers and watch workers contend
  dlock completion bash|zsh|fish                print a shell completion script
  dlock version                                 print the version and the commit it was built from
  dlock help [COMMAND]                          print this help, or a command's
  dlock help run-flags | run-details            every flag of run; how run supervises, waits, exits

The lock service comes from one of:
  --redis URL                      one Redis; three or more times: Redlock
  --redis-cluster host:port,...    a Redis Cluster (some of its nodes)
  --redis-sentinel host:port,... --redis-master NAME
                                   the master NAME that the Sentinels monitor
  --zk host:port,...[/chroot]      ZooKeeper; every path below the chroot
  --postgres URL, --mysql DSN      (--session: session mode; --table NAME)
  --etcd host:port,...
or from DLOCK_REDIS, DLOCK_REDIS_CLUSTER, DLOCK_REDIS_SENTINEL (with
DLOCK_REDIS_MASTER), DLOCK_ZK, DLOCK_POSTGRES, DLOCK_MYSQL or DLOCK_ETCD.
--password-file FILE (or, for Redis, DLOCK_REDIS_PASSWORD) supplies the
password of a URL or DSN without one, and of a Redis Cluster or Sentinel
master (Sentinels' own: DLOCK_REDIS_SENTINEL_PASSWORD): a password in a
flag is on the command line, which every user reads. --zk-auth-file FILE (or DLOCK_ZK_AUTH=user:password) authenticates
to ZooKeeper, and --etcd-user with --password-file (or DLOCK_ETCD_PASSWORD)
to etcd. A flag for other backends (--restart-window: Redlock; --table,
--session: PostgreSQL, MySQL) is refused, exit 64. 'dlock schema
postgres|mysql' prints the SQL of dlock's tables.

A NAME names one lock on every backend: "a" and "a/b" are two locks. A
NAME that starts with a dash goes after "--": dlock run -- -x -- COMMAND.

Exit codes: 64 bad usage (a flag, a URL, a NAME the backend cannot take);
69 the lock service cannot be reached or failed; each command's others
are in its help.

Run 'dlock help COMMAND' for a command's flags and exit codes.
`

// commands maps each subcommand to its entry point.
var commands = map[string]func(args []string, io cmdutil.IO) int{
	"run":        run.Main,
	"elect":      run.ElectMain,
	"inspect":    inspect.Main,
	"release":    inspect.ReleaseMain,
	"list":       inspect.ListMain,
	"bench":      bench.Main,
	"chaos":      chaos.Main,
	"demo":       demo.Main,
	"fence":      fencecmd.Main,
	"schema":     backend.SchemaMain,
	"completion": completionMain,
	"version":    versionMain,
}

// topics are the help topics that are not commands: "dlock help TOPIC".
var topics = map[string]func(w io.Writer){
	"run-flags":   run.PrintFlags,
	"run-details": run.PrintDetails,
}

// Main runs the dlock command with args (without the program name) and
// returns the process exit code.
//
// Nothing it writes holds a secret it was given: it notes what may be
// one in every argument and in the lock service's variables before it
// parses anything, and writes through cmdutil.Redacting.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	cmdutil.NoteSecrets(args...)
	for _, name := range backend.ConnectionEnv() {
		cmdutil.NoteSecrets(getenv(name))
	}
	for _, name := range backend.PasswordEnv() {
		cmdutil.NoteSecret(getenv(name))
	}
	stdout, stderr = cmdutil.Redacting(stdout), cmdutil.Redacting(stderr)
	streams := cmdutil.IO{In: stdin, Out: stdout, Err: stderr, Getenv: getenv}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return cmdutil.ExitUsage
	}
	switch name := args[0]; name {
	case "--version", "-version":
		return versionMain(nil, streams)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if topic, ok := topics[args[1]]; ok {
				topic(stdout)
				return cmdutil.ExitOK
			}
			if cmd, ok := commands[args[1]]; ok {
				return cmd([]string{"--help"}, streams)
			}
			fmt.Fprintf(stderr, "dlock help: unknown command %q; run 'dlock help' for the list\n", args[1])
			return cmdutil.ExitUsage
		}
		fmt.Fprint(stdout, usage)
		return cmdutil.ExitOK
	default:
		if cmd, ok := commands[name]; ok {
			return cmd(args[1:], streams)
		}
		fmt.Fprintf(stderr, "dlock: unknown command %q; run 'dlock help' for the list\n", name)
		return cmdutil.ExitUsage
	}
}
