package demo

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/internal/testenv"
)

func TestParse(t *testing.T) {
	tests := []struct {
		args    []string
		want    Options
		wantErr string // substring of the one-line UsageError; "" for none
	}{
		{args: nil, want: Options{Workers: DefaultWorkers, Rounds: DefaultRounds}},
		{args: []string{"--workers", "1", "--rounds", "100"}, want: Options{Workers: 1, Rounds: 100}},
		{args: []string{"-workers=64", "--no-zk"}, want: Options{Workers: 64, Rounds: DefaultRounds, NoZK: true}},
		{args: []string{"--workers", "0"}, wantErr: "dlock demo: --workers 0 is out of range; use 1 to 64"},
		{args: []string{"--workers", "65"}, wantErr: "--workers 65 is out of range"},
		{args: []string{"--rounds", "0"}, wantErr: "dlock demo: --rounds 0 is out of range; use 1 to 100"},
		{args: []string{"--rounds", "101"}, wantErr: "--rounds 101 is out of range"},
		{args: []string{"--workers", "many"}, wantErr: `dlock demo: invalid value "many" for --workers`},
		{args: []string{"--workers"}, wantErr: "dlock demo: --workers needs a value"},
		{args: []string{"--zk"}, wantErr: "dlock demo: unknown flag --zk; run 'dlock demo --help' for the flags"},
		{args: []string{"now"}, wantErr: `dlock demo: takes no arguments, got ["now"]`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got, err := Parse(tt.args)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Parse(%q) = %+v, %v; want %+v, nil", tt.args, got, err, tt.want)
				}
				return
			}
			if err == nil || !cmdutil.IsUsage(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse(%q) error = %v; want a UsageError containing %q", tt.args, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

// run calls Main and returns its exit code and streams.
func run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(args, cmdutil.IO{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }})
	return code, out.String(), errb.String()
}

func TestMainUsage(t *testing.T) {
	code, out, errs := run("--help")
	if code != cmdutil.ExitOK || !strings.HasPrefix(out, "Usage: dlock demo") || !strings.Contains(out, "-no-zk") || errs != "" {
		t.Errorf("--help: exit %d, stdout %q, stderr %q; want 0, the usage with the flags, nothing", code, out, errs)
	}
	code, out, errs = run("--workers", "0")
	if code != cmdutil.ExitUsage || out != "" || strings.Count(errs, "\n") != 1 {
		t.Errorf("--workers 0: exit %d, stdout %q, stderr %q; want 64 and one line on stderr", code, out, errs)
	}
}

// mustContain fails the test for every pattern that out does not match.
func mustContain(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("output does not match %q", p)
		}
	}
}

func TestIntegrationDemo(t *testing.T) {
	testenv.SkipIfShort(t, "runs the demo's servers")
	testenv.RequireBinary(t, "redis-server")
	t.Run("with ZooKeeper", func(t *testing.T) {
		if err := testenv.LookZooKeeper(); err != nil {
			t.Skip(err) // the no-zk run below still checks the rest
		}
		code, out, errs := run("--workers", "3", "--rounds", "2")
		t.Log("\n" + out)
		if code != cmdutil.ExitOK || errs != "" {
			t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errs)
		}
		mustContain(t, out,
			`(?m)^\+\d+\.\d\ds  node C 127\.0\.0\.1:\d+ killed \(kill -9\)`,
			`(?m)^\+\d+\.\d\ds  \d+ grants on A and B alone, still a majority`,
			`(?m)^\+\d+\.\d\ds  node C restarted on the same port, empty`,
			`(?m)^\+\d+\.\d\ds  granted again, \d+\.\d\ds after B stopped`,
			`(?m)^\+\d+\.\d\ds  \d+ grants with all three nodes up again`,
			`At most one holder at any time, and every fence larger than the one before`,
			`A wakes up and writes anyway with fence \d+: refused: fence \d+ is older than \d+`,
			`served in the order: 1 2 3 1 `, // the gate fixes the first round; later ones follow who re-queued first
			`X's Done\(\) closes: `,
			`(?m)^Violations:    0 `,
		)
		if strings.Contains(out, "skipped") || strings.Contains(out, "Skipped") {
			t.Errorf("ZooKeeper part skipped although ZooKeeper is installed")
		}
		checkGrants(t, out, 3*2)
	})
	t.Run("no-zk", func(t *testing.T) {
		code, out, errs := run("--workers", "2", "--rounds", "2", "--no-zk")
		t.Log("\n" + out)
		if code != cmdutil.ExitOK || errs != "" {
			t.Fatalf("exit %d, stderr %q; want 0 and nothing", code, errs)
		}
		mustContain(t, out, `killed \(kill -9\)`, `granted again`, `(?m)^Violations:    0 `,
			`(?m)^Skipped \(--no-zk\)\.$`, `(?m)^ZooKeeper:     skipped \(--no-zk\)$`)
		if strings.Contains(out, "Started ZooKeeper") {
			t.Errorf("--no-zk started ZooKeeper anyway")
		}
		checkGrants(t, out, 2*2)
	})
}

// checkGrants checks the summary's grant count against what the flags ask
// for: perPart on one Redis, at least 3 per part plus one on Redlock, and
// output free of terminal control codes.
func checkGrants(t *testing.T, out string, perPart int) {
	t.Helper()
	if strings.Contains(out, "\x1b") {
		t.Errorf("output holds terminal control codes")
	}
	m := regexp.MustCompile(`Grants:\s+\d+ \((\d+) on one Redis, (\d+) on Redlock`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no grant count in the summary")
	}
	redis, _ := strconv.Atoi(m[1])
	redlock, _ := strconv.Atoi(m[2])
	if redis != perPart || redlock < 3*perPart+1 {
		t.Errorf("grants: %d on one Redis, %d on Redlock; want %d and at least %d", redis, redlock, perPart, 3*perPart+1)
	}
}
