// Command dlock runs commands under distributed locks, inspects and
// force-releases locks, benchmarks a deployment, tortures local servers
// with faults and demonstrates dlock. See "dlock help".
package main

import (
	"os"

	"github.com/dlock-go/dlock/chaos"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/run"
)

func main() {
	chaos.RunClientIfChild() // "dlock chaos" runs its clients as copies of dlock
	run.SuperviseIfChild()   // "dlock run" supervises COMMAND from a copy of dlock
	_ = cli.Undumpable()     // COMMAND, of the same user, cannot read dlock's environment
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
