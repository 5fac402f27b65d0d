package fencecmd

import (
	"strings"
	"testing"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

func TestParse(t *testing.T) {
	env := func(fence string) func(string) string {
		return func(k string) string {
			if k == EnvFence {
				return fence
			}
			return ""
		}
	}
	for _, c := range []struct {
		args  string
		env   string
		fence uint64
		err   string // a part of the usage error; "" for none
	}{
		{"check --file f", "7", 7, ""},
		{"check --file f --fence 9", "7", 9, ""},
		{"write --redis redis://h:1 --resource k --fence 1", "", 1, ""},
		{"check --postgres postgres://h/db --resource r --table app.fences", "3", 3, ""},
		{"check --file f --fence 9223372036854775808", "", 0, `--fence is "9223372036854775808"`},
		{"check --file f", "", 0, "no fence"},
		{"check --file f", " 7", 0, `$DLOCK_FENCE is " 7"`},
		{"check", "7", 0, "give one of"},
		{"check --file f --postgres p --resource r", "7", 0, "give one of"},
		{"check --redis r", "7", 0, "missing --resource"},
		{"write --postgres p --resource r", "7", 0, "takes --file or --redis"},
		{"check --file f extra", "7", 0, `unexpected argument "extra"`},
		{"check --bogus", "7", 0, "unknown flag --bogus"},
		{"", "7", 0, "missing check, write or reset"},
		{"--file f", "7", 0, "missing check, write or reset"},
	} {
		_, f, err := parse(strings.Fields(c.args), env(c.env))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.err == "" && f != c.fence:
			t.Errorf("%q: fence %d; want %d", c.args, f, c.fence)
		case c.err != "" && (!cmdutil.IsUsage(err) || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q with DLOCK_FENCE=%q: %v; want a usage error with %q", c.args, c.env, err, c.err)
		}
	}
}

// The connection URLs are checked as the other commands check them, and
// their messages hide the password.
func TestResolve(t *testing.T) {
	for _, c := range []struct{ args, want string }{
		{"check --postgres notaurl --resource r", "failed to parse"},
		{"check --postgres mysql://u:s3cret@h/db --resource r", `scheme "mysql"`},
		{"check --redis http://u:s3cret@h --resource r", `scheme "http"`},
		{"check --redis redis://u:s3cret@h:99999 --resource r", "port"},
	} {
		o, _, err := parse(strings.Fields(c.args+" --fence 1"), func(string) string { return "" })
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		_, err = o.resolve(func(string) string { return "" })
		if !cmdutil.IsUsage(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: %v; want a usage error with %q and no password", c.args, err, c.want)
		}
	}
}
