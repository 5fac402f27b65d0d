package main_test

import (
	"regexp"
	"strings"
	"testing"
)

// Every mistake in how dlock is called gets exit code 64 and one line on
// stderr that names the mistake, before any server is contacted.
//
// Bad names are usage errors too, whatever the backend would say of them,
// and a name is echoed cut short, not whole.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	redis := "--redis=redis://127.0.0.1:1"
	longName := strings.Repeat("n", 10000)
	cases := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no arguments", nil, "Usage:"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"unknown flag", []string{"run", "--frob", "x", "--", "true"}, "unknown flag --frob"},
		{"missing name", []string{"run", redis}, "missing lock NAME"},
		{"once-per without command", []string{"run", redis, "--once-per", "1h", "x"}, "--once-per needs a COMMAND"},
		{"dashed name without a second --", []string{"run", redis, "--", "-x", "true"}, "missing lock NAME"},
		{"missing command after --", []string{"run", redis, "x", "--"}, "missing COMMAND"},
		{"two names", []string{"run", redis, "x", "y", "--", "true"}, "want only NAME"},
		{"no backend", []string{"run", "x", "--", "true"}, "no lock service"},
		{"bad scheme", []string{"run", "--redis", "http://127.0.0.1:1", "x", "--", "true"}, `scheme "http"`},
		{"not a URL", []string{"run", "--redis", "127.0.0.1:6379", "x", "--", "true"}, "redis://"},
		{"bad port", []string{"run", "--redis", "redis://127.0.0.1:70000", "x", "--", "true"}, "port"},
		{"password not shown", []string{"run", "--redis", "redis://u:hunter2@127.0.0.1:0", "x", "--", "true"}, "xxxxx"},
		{"two urls", []string{"run", redis, "--redis=redis://127.0.0.1:2", "x", "--", "true"}, "two Redis URLs"},
		{"same url twice", []string{"run", redis, redis, redis, "x", "--", "true"}, "given twice"},
		{"both backends", []string{"run", redis, "--zk", "127.0.0.1:1", "x", "--", "true"}, "choose one"},
		{"bad zk", []string{"run", "--zk", "127.0.0.1", "x", "--", "true"}, "host:port"},
		{"ttl without unit", []string{"run", redis, "--ttl", "30", "x", "--", "true"}, "needs a unit"},
		{"ttl too short", []string{"run", redis, "--ttl", "1ms", "x", "--", "true"}, "too short"},
		{"ttl too long", []string{"run", redis, "--ttl", "2562047h", "x", "--", "true"}, "longer than 24h"},
		{"ttl too long on etcd", []string{"run", "--etcd", "127.0.0.1:1", "--ttl", "25h", "x", "--", "true"}, "longer than 24h"},
		{"elect ttl too long", []string{"elect", redis, "--ttl", "25h", "x", "--", "true"}, "longer than 24h"},
		{"negative redis db", []string{"run", "--redis", "redis://127.0.0.1:1/-1", "x", "--", "true"}, "not a database number"},
		{"redis db not a number", []string{"run", "--redis", "redis://127.0.0.1:1/abc", "x", "--", "true"}, "not a database number"},
		{"grace over a third of the ttl", []string{"run", redis, "--ttl", "3s", "--grace", "1500ms", "x", "--", "true"}, "--grace 1.5s is more than a third of --ttl 3s"},
		{"grace of 10s with a 10s ttl", []string{"run", redis, "--ttl", "10s", "--grace", "10s", "x", "--", "true"}, "use --grace 3.33s or less, or --ttl 30s or more"},
		{"negative wait", []string{"run", redis, "--wait", "-1s", "x", "--", "true"}, "negative"},
		{"bad wait", []string{"run", redis, "--wait", "always", "x", "--", "true"}, "forever"},
		{"bad kind", []string{"run", redis, "--kind", "spin", "x", "--", "true"}, `--kind "spin"`},
		{"semaphore without permits", []string{"run", redis, "--kind", "semaphore", "x", "--", "true"}, "--permits"},
		{"permits without semaphore", []string{"run", redis, "--permits", "2", "x", "--", "true"}, "only for --kind semaphore"},
		{"conflict code of a lost lock", []string{"run", redis, "--conflict-exit-code", "76", "x", "--", "true"}, "--conflict-exit-code 76 is one of dlock's own exit codes"},
		{"conflict code of bad usage", []string{"run", redis, "--conflict-exit-code", "64", "x", "--", "true"}, "one of dlock's own"},
		{"conflict code of max-hold", []string{"run", redis, "--conflict-exit-code", "79", "x", "--", "true"}, "one of dlock's own"},
		{"conflict code out of range", []string{"run", redis, "--conflict-exit-code", "300", "x", "--", "true"}, "1 to 255"},
		{"max-hold shorter than the stop", []string{"run", redis, "--ttl", "10s", "--grace", "3s", "--max-hold", "3s", "x", "--", "true"}, "--max-hold 3s leaves COMMAND no time"},
		{"max-hold under ttl/20 without --grace", []string{"run", redis, "--max-hold", "1s", "x", "--", "true"}, "or a shorter --ttl (ttl/20 is 1.5s)"},
		{"max-hold 1s suggests the least cap", []string{"run", redis, "--max-hold", "1s", "x", "--", "true"}, "use --max-hold 2.3s or more"},
		{"max-hold 2s suggests the same least cap", []string{"run", redis, "--max-hold", "2s", "x", "--", "true"}, "use --max-hold 2.3s or more"},
		{"max-hold with grace suggests grace + ttl/20", []string{"run", redis, "--ttl", "10s", "--grace", "3s", "--max-hold", "1s", "x", "--", "true"}, "use --max-hold 3.6s or more"},
		{"max-hold without unit", []string{"run", redis, "--max-hold", "5", "x", "--", "true"}, "needs a unit"},
		{"session without postgres", []string{"run", redis, "--session", "x", "--", "true"}, "--session is PostgreSQL's and MySQL's session mode; it needs --postgres or --mysql"},
		{"postgres and redis", []string{"run", redis, "--postgres", "postgres://127.0.0.1:1/x", "x", "--", "true"}, "choose one"},
		{"postgres bad scheme", []string{"run", "--postgres", "mysql://u:hunter2@127.0.0.1:1/x", "x", "--", "true"}, `scheme "mysql"`},
		{"postgres bad port", []string{"run", "--postgres", "postgres://u:hunter2@127.0.0.1:99999/x", "x", "--", "true"}, "--postgres"},
		{"postgres kind", []string{"run", "--postgres", "postgres://127.0.0.1:1/x", "--kind", "read", "x", "--", "true"}, "only --kind mutex"},
		{"restart-window on ZooKeeper", []string{"run", "--zk", "127.0.0.1:1", "--restart-window", "1h", "x", "--", "true"}, "--restart-window applies to Redlock only"},
		{"flag needs value", []string{"run", redis, "--ttl"}, "--ttl needs a value"},
		{"flag after name without --", []string{"run", redis, "x", "--ttl", "5s", "true"}, "starts with a dash"},
		{"brace in name", []string{"run", redis, "a{b}", "--", "true"}, "brace"},
		{"empty name", []string{"run", redis, "", "--", "true"}, "empty lock name"},
		{"name too long for Redis", []string{"run", redis, longName, "--", "true"}, "(10000 bytes) is too long"},
		{"name too long for ZooKeeper", []string{"run", "--zk", "127.0.0.1:1", longName, "--", "true"}, "(10000 bytes) would be a ZooKeeper path that is too long"},
		{"inspect name too long", []string{"inspect", redis, longName}, "(10000 bytes) is too long"},
		{"emoji on ZooKeeper", []string{"run", "--zk", "127.0.0.1:1", "🔒", "--", "true"}, "U+1F512"},
		{"reserved ZooKeeper path", []string{"run", "--zk", "127.0.0.1:1", "/zookeeper", "--", "true"}, "reserves"},
		{"reserved ZooKeeper subpath", []string{"release", "--force", "--yes", "--zk", "127.0.0.1:1", "/zookeeper/quota"}, "reserves"},
		{"dot-dot on ZooKeeper", []string{"run", "--zk", "127.0.0.1:1", "a/../b", "--", "true"}, `".."`},
		{"help unknown", []string{"help", "frob"}, "unknown command"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := dlock(t, nil, tc.args...)
			if r.code != 64 {
				t.Fatalf("exit code %d, want 64; stderr:\n%s", r.code, r.stderr)
			}
			if strings.Contains(r.stderr, "hunter2") {
				t.Errorf("stderr shows the password: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q does not mention %q", r.stderr, tc.want)
			}
			if tc.args != nil && strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("stderr has more than one line:\n%s", r.stderr)
			}
			if tc.args != nil && len(r.stderr) > 500 {
				t.Errorf("stderr is %d bytes; want a name cut short", len(r.stderr))
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "run"}, {"run", "--help"}} {
		r := dlock(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage") {
			t.Errorf("dlock %v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
	r := dlock(t, nil, "help", "run")
	for _, flag := range []string{"-redis", "-zk", "-ttl", "-wait", "-kind", "-permits", "-conflict-exit-code", "-grace", "-leave-children", "-metrics-addr", "DLOCK_FENCE", "76"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("dlock help run does not mention %s", flag)
		}
	}
	// The commit is there when the binary was built in a git checkout
	// with VCS stamping (not in a git worktree, where go build finds no
	// repository): describeVersion's unit test covers both.
	if r := dlock(t, nil, "version"); r.code != 0 || !regexp.MustCompile(`^dlock \S+ \(commit ([0-9a-f]{40}|unknown)[,;)]`).MatchString(r.stdout) {
		t.Errorf("dlock version: exit %d, %q; want the version and the commit", r.code, r.stdout)
	}
	if r := dlock(t, nil, "help", "version"); r.code != 0 || !strings.Contains(r.stdout, "Usage: dlock version") {
		t.Errorf("dlock help version: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := dlock(t, nil, "version", "extra"); r.code != 64 {
		t.Errorf("dlock version extra: exit %d, want 64", r.code)
	}
}

// The help of inspect and release documents only flags they take: not
// --session, and not run's --ttl.
func TestHelpNamesOnlyOwnFlags(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"inspect", "release"} {
		r := dlock(t, nil, "help", cmd)
		if r.code != 0 || strings.Contains(r.stdout, "--session") || strings.Contains(r.stdout, "--ttl if") {
			t.Errorf("dlock help %s: exit %d, help names --session or --ttl:\n%s", cmd, r.code, r.stdout)
		}
	}
	if r := dlock(t, nil, "help"); strings.Contains(r.stdout, "(run and bench;") {
		t.Errorf("dlock help says only run and bench take --postgres and --mysql:\n%s", r.stdout)
	}
	if r := dlock(t, nil, "help", "run-flags"); !strings.Contains(r.stdout, "--session") {
		t.Errorf("dlock help run-flags does not name --session:\n%s", r.stdout)
	}
}

// "dlock help run" fits on one screen, at most 50 lines; "dlock help
// run-flags" documents every flag of dlock run, each once, and "dlock help
// run-details" the rest of what run does.
func TestHelpRunFitsOneScreen(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help", "run"}, {"run", "--help"}} {
		r := dlock(t, nil, args...)
		if n := strings.Count(r.stdout, "\n"); r.code != 0 || n > 50 {
			t.Errorf("dlock %v: exit %d, %d lines; want 0 and at most 50:\n%s", args, r.code, n, r.stdout)
		}
		if !strings.Contains(r.stdout, "dlock help run-flags") || !strings.Contains(r.stdout, "dlock help run-details") {
			t.Errorf("dlock %v does not point to run-flags and run-details:\n%s", args, r.stdout)
		}
	}
	flags := dlock(t, nil, "help", "run-flags")
	for _, f := range []string{"--ttl", "--wait", "--kind", "--permits", "--once-per", "--max-hold", "--grace", "--conflict-exit-code",
		"--leave-children", "-v", "--metrics-addr", "--metrics-push", "--metrics-textfile", "--log-format", "--redis", "--redis-cluster",
		"--redis-sentinel", "--redis-master", "--zk", "--zk-auth-file", "--postgres", "--mysql", "--etcd", "--etcd-user", "--session",
		"--table", "--restart-window", "--password-file", "--tls-ca", "--tls-cert", "--tls-key", "--tls-server-name"} {
		if n := strings.Count(flags.stdout, "\n  "+f+" ") + strings.Count(flags.stdout, "\n  "+f+"\n"); flags.code != 0 || n != 1 {
			t.Errorf("dlock help run-flags lists %s %d times; want once", f, n)
		}
	}
	details := dlock(t, nil, "help", "run-details")
	for _, s := range []string{"--leave-children", "--max-hold", "--once-per", "--wait", "--metrics-push", "--log-format", "DLOCK_WAIT_REPORT_EVERY", "128+n"} {
		if details.code != 0 || !strings.Contains(details.stdout, s) {
			t.Errorf("dlock help run-details does not explain %s", s)
		}
	}
}
