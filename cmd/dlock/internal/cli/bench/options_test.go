package bench

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, o Options)
		err   string // a substring of the UsageError; "" for success
	}{
		{name: "defaults", args: nil, check: func(t *testing.T, o Options) {
			if !slices.Equal(o.Scenarios, Scenarios) || o.Duration != DefaultDuration || o.Clients != DefaultClients ||
				o.Goroutines != DefaultGoroutines || o.Hold != DefaultHold || o.Kind != "mutex" || o.TTL != DefaultTTL ||
				o.Format != FormatTable || o.Chart != "" || o.Permits != 0 {
				t.Errorf("defaults: %+v", o)
			}
			if !strings.HasPrefix(o.Prefix, PrefixBase) || len(o.Prefix) != len(PrefixBase)+8 {
				t.Errorf("default prefix %q, want %s<8 hex digits>", o.Prefix, PrefixBase)
			}
		}},
		{name: "everything", args: []string{"--redis", "redis://h:1", "--scenarios", "s3, S1", "--duration", "300ms", "--clients", "4",
			"--goroutines", "16", "--hold", "1ms", "--kind", "semaphore", "--permits", "2", "--ttl", "2s", "-o", "json",
			"--chart", "out.SVG", "--prefix", "mybench"}, check: func(t *testing.T, o Options) {
			if !slices.Equal(o.Scenarios, []string{"S1", "S3"}) || o.Duration != 300*time.Millisecond || o.Clients != 4 ||
				o.Goroutines != 16 || o.Hold != time.Millisecond || o.Kind != "semaphore" || o.Permits != 2 ||
				o.TTL != 2*time.Second || o.Format != FormatJSON || o.Chart != "out.SVG" || o.Prefix != "mybench" ||
				o.Backend.Redis.String() != "redis://h:1" {
				t.Errorf("got %+v", o)
			}
		}},
		{name: "prefixes differ", args: nil, check: func(t *testing.T, o Options) {
			p, err := Parse(nil)
			if err != nil || p.Prefix == o.Prefix {
				t.Errorf("two runs got prefixes %q and %q (%v)", o.Prefix, p.Prefix, err)
			}
		}},
		{name: "unknown scenario", args: []string{"--scenarios", "S1,S9"}, err: `invalid value "S1,S9" for --scenarios: unknown scenario S9; choose from S1,S2,S3,S4`},
		{name: "empty scenario", args: []string{"--scenarios", "S1,"}, err: "empty scenario"},
		{name: "duration without unit", args: []string{"--duration", "5"}, err: `for --duration: a duration needs a unit, such as 5s`},
		{name: "duration too short", args: []string{"--duration", "1ms"}, err: `for --duration: use at least 10ms`},
		{name: "duration garbage", args: []string{"--duration", "soon"}, err: `for --duration: want a duration such as 300ms or 5s`},
		{name: "negative hold", args: []string{"--hold", "-1s"}, err: `for --hold: a duration cannot be negative`},
		{name: "one client", args: []string{"--clients", "1"}, err: `for --clients: want a whole number from 2 to 1000`},
		{name: "clients not a number", args: []string{"--clients", "many"}, err: `for --clients: want a whole number from 2 to 1000`},
		{name: "no goroutines", args: []string{"--goroutines", "0"}, err: `for --goroutines: want a whole number from 1 to 10000`},
		{name: "bad kind", args: []string{"--kind", "spin"}, err: `for --kind: want one of mutex, fair, read, write, semaphore`},
		{name: "bad format", args: []string{"-o", "csv"}, err: `for --o: want one of table, json`},
		{name: "ttl too short", args: []string{"--ttl", "10ms"}, err: `for --ttl: use at least 100ms`},
		{name: "semaphore without permits", args: []string{"--kind", "semaphore"}, err: "--kind semaphore needs --permits N"},
		{name: "permits without semaphore", args: []string{"--permits", "3"}, err: "--permits is only for --kind semaphore"},
		{name: "zero permits", args: []string{"--kind", "semaphore", "--permits", "0"}, err: "for --permits: want a whole number from 1"},
		{name: "hold near ttl", args: []string{"--hold", "1s", "--ttl", "1s"}, err: "--hold 1s is not well below --ttl 1s"},
		{name: "chart not svg", args: []string{"--chart", "out.png"}, err: `--chart "out.png": the chart is SVG; give a file name ending in .svg`},
		{name: "empty prefix", args: []string{"--prefix", " "}, err: "--prefix is empty"},
		{name: "positional", args: []string{"nightly"}, err: `takes no arguments, got ["nightly"]`},
		{name: "unknown flag", args: []string{"--wait", "5s"}, err: "unknown flag --wait"},
		{name: "missing value", args: []string{"--clients"}, err: "--clients needs a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := Parse(tt.args)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Parse(%q): %v", tt.args, err)
				}
				tt.check(t, o)
				return
			}
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want one containing %q", tt.args, tt.err)
			}
			if !cmdutil.IsUsage(err) || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("Parse(%q) = %q (usage error: %v), want one line containing %q", tt.args, err, cmdutil.IsUsage(err), tt.err)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out, errOut bytes.Buffer
		code := Main([]string{arg}, cmdutil.IO{Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
		if code != cmdutil.ExitOK || errOut.Len() > 0 {
			t.Errorf("%s: exit %d, stderr %q", arg, code, errOut.String())
		}
		for _, want := range []string{"Usage: dlock bench", "S4  nodes", "-scenarios", "-chart", "-prefix", "-redis", "-zk", "-clients", "Exit codes"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: help lacks %q", arg, want)
			}
		}
	}
}

// TestMainUsage checks the usage errors found after the flags are parsed:
// one line on stderr, exit 64, and nothing on stdout.
func TestMainUsage(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "dlock bench: no lock service"},
		{[]string{"--duration", "x"}, nil, "for --duration"},
		{[]string{"--redis", "a://b"}, nil, `scheme "a" is not supported`},
		{[]string{"--redis", "redis://a:1", "--redis", "redis://b:1", "--redis", "redis://c:1", "--kind", "fair"}, nil,
			"--kind fair is not available with Redlock"},
		{[]string{"--redis", "redis://a:1", "--prefix", "a{b}"}, nil, `--prefix "a{b}"`},
		{[]string{"--zk", "a:1", "--prefix", "x//y"}, nil, "empty path segment"},
		{[]string{"--redis", "redis://a:1", "--chart", filepath.Join(dir, "missing", "c.svg")}, nil, "--chart " + filepath.Join(dir, "missing", "c.svg") + " cannot be written"},
		{nil, map[string]string{"DLOCK_REDIS": "redis://a:1 redis://b:1"}, "two Redis URLs"},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		code := Main(tt.args, cmdutil.IO{Out: &out, Err: &errOut, Getenv: func(k string) string { return tt.env[k] }})
		msg := errOut.String()
		if code != cmdutil.ExitUsage || !strings.Contains(msg, tt.want) || strings.Count(msg, "\n") != 1 || out.Len() > 0 {
			t.Errorf("Main(%q) = %d, stderr %q, stdout %q; want 64 and one line containing %q", tt.args, code, msg, out.String(), tt.want)
		}
	}
}
