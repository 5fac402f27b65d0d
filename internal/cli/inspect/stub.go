package inspect

import "github.com/dlock-go/dlock/internal/cli/cmdutil"

func Main(args []string, io cmdutil.IO) int        { return 0 }
func ReleaseMain(args []string, io cmdutil.IO) int { return 0 }
