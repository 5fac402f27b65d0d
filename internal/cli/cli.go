// Package cli implements the dlock command. Each subcommand has an options
// struct, a parser and a run function that writes to injected streams and
// returns an exit code, so that tests can drive it without a process.
package cli

import (
	"fmt"
	"io"
)

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Version is the dlock version, set at build time with -ldflags.
var Version = "dev"

const usage = `dlock: distributed locks for Go, on Redis.

Usage:
  dlock demo [-workers N] [-rounds N]   start a local redis-server and watch workers contend for one lock
  dlock version                         print the version
  dlock help                            print this help
`

// Main runs the dlock command with args (without the program name) and
// returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	switch args[0] {
	case "demo":
		return runDemo(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "dlock", Version)
		return ExitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return ExitOK
	}
	fmt.Fprintf(stderr, "dlock: unknown command %q; run 'dlock help' for the list\n", args[0])
	return ExitUsage
}
