package cli

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// Version is the dlock version, set at build time with
// -ldflags "-X github.com/dlock-go/dlock/cmd/dlock/internal/cli.Version=v1.2.3".
// Without it, the module version from the build information is used.
var Version = ""

const versionUsage = `Usage: dlock version

Prints the version of dlock's module, the commit it was built from (with
its time, and "modified" if the tree had uncommitted changes) and the Go
version, as recorded in the binary (runtime/debug.ReadBuildInfo). A
binary built outside a git checkout, or with -buildvcs=false, has no
commit to show.

Exit codes: 0; 64 bad usage.
`

// versionMain runs "dlock version".
func versionMain(args []string, io cmdutil.IO) int {
	switch {
	case len(args) == 1 && (args[0] == "--help" || args[0] == "-h" || args[0] == "-help"):
		fmt.Fprint(io.Out, versionUsage)
		return cmdutil.ExitOK
	case len(args) > 0:
		fmt.Fprintf(io.Err, "dlock version: takes no arguments (got %q)\n", args)
		return cmdutil.ExitUsage
	}
	bi, _ := debug.ReadBuildInfo()
	fmt.Fprintln(io.Out, describeVersion(bi))
	return cmdutil.ExitOK
}

// describeVersion returns the line "dlock version" prints for the build
// information bi, which may be nil: "dlock v1.2.3 (commit 0123abcd…,
// 2026-11-25T10:00:00Z; go1.25.0)".
func describeVersion(bi *debug.BuildInfo) string {
	version, commit, when, modified, goVersion := Version, "", "", false, ""
	if bi != nil {
		if version == "" {
			version = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if version == "" {
		version = "(devel)"
	}
	var details []string
	if commit != "" {
		c := "commit " + commit
		if when != "" {
			c += ", " + when
		}
		if modified {
			c += ", modified"
		}
		details = append(details, c)
	} else {
		details = append(details, "commit unknown")
	}
	if goVersion != "" {
		details = append(details, goVersion)
	}
	return fmt.Sprintf("dlock %s (%s)", version, strings.Join(details, "; "))
}
