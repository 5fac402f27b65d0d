// Package cmdutil holds what every dlock subcommand shares: exit codes,
// injected streams, and flag parsing whose errors say in one line what was
// wrong and how to fix it.
package cmdutil

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Exit codes. Those from 64 on follow sysexits.h; a command run by
// "dlock run" passes its own code through, and 126, 127 and 128+n keep
// their shell meanings.
const (
	ExitOK          = 0
	ExitError       = 1  // an unexpected failure
	ExitUsage       = 64 // EX_USAGE: a bad flag, argument or environment variable
	ExitUnavailable = 69 // EX_UNAVAILABLE: the lock service cannot be reached or failed
	ExitOSErr       = 71 // EX_OSERR: the operating system refused (listen, fork)
	ExitConflict    = 75 // EX_TEMPFAIL: the lock is held by another owner
	ExitLost        = 76 // the lock was lost while the command ran
	ExitMaxHold     = 79 // the command was stopped at the lock's --max-hold
	ExitCannotExec  = 126
	ExitNotFound    = 127
)

// IO is a command's view of the world outside it.
type IO struct {
	In     io.Reader
	Out    io.Writer
	Err    io.Writer
	Getenv func(string) string
}

// System returns the process's own streams and environment.
func System() IO {
	return IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: os.Getenv}
}

// IsTerminal reports whether s is a terminal.
func IsTerminal(s any) bool {
	if w, ok := s.(io.Writer); ok {
		s = Unwrap(w)
	}
	f, ok := s.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// A UsageError is a mistake in how the command was called. Commands report
// it on one line and exit with ExitUsage.
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef returns a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Sprintf(format, args...)}
}

// IsUsage reports whether err is a UsageError.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// NewFlagSet returns a flag set for the command called name ("dlock run")
// that reports nothing itself: Parse turns its errors into UsageErrors.
func NewFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// ErrHelp is returned by Parse when -h or --help was given.
var ErrHelp = flag.ErrHelp

// Parse parses args with fs, allowing flags after positional arguments,
// and returns the positional arguments. A flag error becomes a UsageError
// that names the flag and says how to see the valid ones.
func Parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ErrHelp
			}
			return nil, explain(fs, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// ParseFlags parses the flags at the start of args with fs, stopping at
// the first positional argument, with Parse's errors.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ErrHelp
		}
		return explain(fs, err)
	}
	return nil
}

// explain rewrites the flag package's messages into ones that say what to
// do.
func explain(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	help := fmt.Sprintf("run '%s --help' for the flags", fs.Name())
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag provided but not defined: "), "-")
		if flag, _, ok := strings.Cut(name, " "); ok && fs.Lookup(flag) != nil {
			// "--postgres URL" as one argument, quoted together: the
			// value is not echoed, since it may hold a password.
			return Usagef("%s: --%s and its value came as one argument (quoted together?); give them as two, or as --%s=VALUE", fs.Name(), flag, flag)
		}
		return Usagef("%s: unknown flag --%s; %s", fs.Name(), RedactInput(name), help)
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-")
		f := fs.Lookup(name)
		example := ""
		if f != nil {
			example = fmt.Sprintf(" (%s)", f.Usage)
		}
		return Usagef("%s: --%s needs a value%s", fs.Name(), name, example)
	case strings.HasPrefix(msg, "invalid value "), strings.HasPrefix(msg, "invalid boolean value "):
		// invalid value "x" for flag -ttl: <reason>
		return Usagef("%s: %s", fs.Name(), Redact(strings.Replace(msg, "for flag -", "for --", 1)))
	}
	return Usagef("%s: %s; %s", fs.Name(), msg, help)
}

// Fail writes "prefix: err" to io.Err as one line and returns the exit code
// that goes with err: ExitUsage for a UsageError, otherwise code.
func Fail(io IO, err error, code int) int {
	fmt.Fprintf(io.Err, "%s\n", oneLine(err.Error()))
	if IsUsage(err) {
		return ExitUsage
	}
	return code
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// PrintUsage writes a command's help to w: its usage text, then its flags
// as the README writes them (--name, or -v for a one-letter flag), each
// with its default once: from its usage text if that names it, otherwise
// from its value, unless that is the zero value.
func PrintUsage(w io.Writer, usage string, fs *flag.FlagSet) {
	fmt.Fprint(w, usage)
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(w, "  %s%s\n    \t%s\n", FlagName(f.Name), argName(f), strings.ReplaceAll(flagUsage(f), "\n", "\n    \t"))
	})
}

// FlagName returns how the help and the README write the flag called
// name: -v for one letter, --name otherwise.
func FlagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// argName returns " TYPE" for a flag that takes a value, "" for a switch.
func argName(f *flag.Flag) string {
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return ""
	}
	name, _ := flag.UnquoteUsage(f)
	if name != "value" {
		return " " + name
	}
	switch t := strings.ToLower(fmt.Sprintf("%T", f.Value)); {
	case strings.Contains(t, "duration"):
		return " duration"
	case strings.Contains(t, "int"):
		return " int"
	case strings.Contains(t, "url"):
		return " URL"
	case strings.Contains(t, "list"):
		return " list"
	}
	return " string"
}

// flagUsage returns the flag's usage with its default, named once.
func flagUsage(f *flag.Flag) string {
	_, usage := flag.UnquoteUsage(f)
	if strings.Contains(usage, "(default ") || strings.Contains(usage, "; default ") {
		return usage
	}
	switch f.DefValue {
	case "", "0", "0s", "false", "[]":
		return usage
	}
	if g, ok := f.Value.(flag.Getter); ok {
		if _, isString := g.Get().(string); isString {
			return fmt.Sprintf("%s (default %q)", usage, f.DefValue)
		}
	}
	return fmt.Sprintf("%s (default %s)", usage, f.DefValue)
}
