package cli

import (
	"github.com/dlock-go/dlock/internal/cli/cmdutil"
)

func benchMain(args []string, io cmdutil.IO) int {
	return cmdutil.Fail(io, errNotBuilt("dlock bench"), cmdutil.ExitError)
}

func demoMain(args []string, io cmdutil.IO) int { return runDemo(args, io.Out, io.Err) }

type errNotBuilt string

func (e errNotBuilt) Error() string { return string(e) + ": not built yet" }
