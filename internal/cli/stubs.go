package cli

import (
	"github.com/dlock-go/dlock/internal/cli/cmdutil"
)

func benchMain(args []string, io cmdutil.IO) int { return runDemo(nil, io.Out, io.Err) }
func demoMain(args []string, io cmdutil.IO) int  { return runDemo(args, io.Out, io.Err) }
