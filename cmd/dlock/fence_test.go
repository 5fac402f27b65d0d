package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// fenceCmd runs "dlock fence ARGS" with stdin and extra environment, and
// returns its exit code, stdout and stderr.
func fenceCmd(t *testing.T, stdin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary(t), append([]string{"fence"}, args...)...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// A file guarded by dlock fence: write with the fence from $DLOCK_FENCE
// or --fence, stale fences exit 77 and write nothing, bad input exits 64
// with a message naming it.
func TestFenceFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "report")
	steps := []struct {
		verb, fence, data string
		code              int
		stderr            string
	}{
		{"write", "5", "five", 0, ""},
		{"write", "5", "five again", 0, ""},
		{"check", "6", "", 0, ""},
		{"write", "5", "stale", 77, `stale fence 5 for "` + file + `"`},
		{"check", "4", "", 77, "written with fence 6"},
		{"write", "7", "seven", 0, ""},
	}
	for i, s := range steps {
		var code int
		var stderr string
		if i%2 == 0 { // from the environment, as under dlock run
			code, _, stderr = fenceCmd(t, s.data, []string{"DLOCK_FENCE=" + s.fence}, s.verb, "--file", file)
		} else {
			code, _, stderr = fenceCmd(t, s.data, nil, s.verb, "--file", file, "--fence", s.fence)
		}
		if code != s.code || !strings.Contains(stderr, s.stderr) {
			t.Fatalf("fence %s with fence %s: exit %d, %q; want %d and %q", s.verb, s.fence, code, stderr, s.code, s.stderr)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "seven" {
		t.Fatalf("the file holds %q; want seven", b)
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"check", "--file", file}, "no fence"},
		{[]string{"DLOCK_FENCE=abc"}, []string{"check", "--file", file}, `$DLOCK_FENCE is "abc"`},
		{nil, []string{"check", "--file", file, "--fence", "0"}, `--fence is "0"`},
		{nil, []string{"check", "--fence", "3"}, "give one of --file"},
		{nil, []string{"check", "--file", file, "--redis", "redis://127.0.0.1:1", "--fence", "3"}, "give one of --file"},
		{nil, []string{"check", "--file", file, "--resource", "r", "--fence", "3"}, "--resource goes with"},
		{nil, []string{"frob", "--file", file, "--fence", "3"}, `"frob" is not check, write or reset`},
		{nil, []string{}, "missing check, write or reset"},
		{nil, []string{"write", "--postgres", "postgres://127.0.0.1:1/x", "--resource", "r", "--fence", "3"}, "takes --file or --redis"},
		{nil, []string{"check", "--redis", "http://x", "--resource", "r", "--fence", "3"}, "--redis"},
		{nil, []string{"check", "--redis", "redis://127.0.0.1:1", "--resource", "a}b", "--fence", "3"}, "hash tag"},
		{nil, []string{"check", "--postgres", "postgres://127.0.0.1:1/x", "--resource", "r", "--table", "a;b", "--fence", "3"}, "--table"},
	} {
		code, _, stderr := fenceCmd(t, "", c.env, c.args...)
		if code != 64 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("dlock fence %q: exit %d, %q; want 64 and one line with %q", c.args, code, stderr, c.want)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "seven" {
		t.Fatalf("the file holds %q after bad input; want seven", b)
	}
	if code, out, _ := fenceCmd(t, "", nil, "--help"); code != 0 || !strings.Contains(out, "77 the fence is") {
		t.Errorf("dlock fence --help: exit %d, %q", code, out)
	}
}

// dlock fence check against PostgreSQL and Redis, and write to Redis; an
// unreachable server exits 69; a Redis that does not persist every write
// exits 64, unless --accept-fence-loss.
func TestFenceServers(t *testing.T) {
	t.Parallel()
	pg := testenv.StartPostgres(t)
	rs := testenv.StartRedis(t, testenv.RedisConfig{Persistence: true})
	pgFlags := []string{"--postgres", pg.URL(), "--resource", "accounts/7"}
	redisFlags := []string{"--redis", "redis://" + rs.Addr(), "--resource", "report"}
	for _, s := range []struct {
		flags []string
		verb  string
		fence string
		code  int
	}{
		{pgFlags, "check", "10", 0},
		{pgFlags, "check", "10", 0},
		{pgFlags, "check", "9", 77},
		{pgFlags, "check", "11", 0},
		{redisFlags, "write", "10", 0},
		{redisFlags, "write", "9", 77},
		{redisFlags, "check", "12", 0},
		{redisFlags, "write", "11", 77},
		{redisFlags, "write", "12", 0},
	} {
		code, _, stderr := fenceCmd(t, "data "+s.fence, nil, append([]string{s.verb, "--fence", s.fence}, s.flags...)...)
		if code != s.code {
			t.Fatalf("fence %s %v with fence %s: exit %d, %q; want %d", s.verb, s.flags[0], s.fence, code, stderr, s.code)
		}
	}
	if v, err := rs.Do("GET", "report"); err != nil || v != "data 12" {
		t.Fatalf("GET report: %q, %v; want data 12", v, err)
	}
	volatile := testenv.StartRedis(t, testenv.RedisConfig{})
	volatileFlags := []string{"--redis", "redis://" + volatile.Addr(), "--resource", "report"}
	for _, verb := range []string{"check", "write"} {
		code, _, stderr := fenceCmd(t, "data", nil, append([]string{verb, "--fence", "3"}, volatileFlags...)...)
		if code != 64 || !strings.Contains(stderr, "appendonly no") || !strings.Contains(stderr, "--accept-fence-loss") || strings.Contains(stderr, "NewRedis") {
			t.Errorf("fence %s on a Redis without persistence: exit %d, %q; want 64 naming appendonly and --accept-fence-loss", verb, code, stderr)
		}
		code, _, stderr = fenceCmd(t, "data", nil, append([]string{verb, "--fence", "3", "--accept-fence-loss"}, volatileFlags...)...)
		if code != 0 {
			t.Errorf("fence %s --accept-fence-loss on a Redis without persistence: exit %d, %q; want 0", verb, code, stderr)
		}
	}
	if code, _, stderr := fenceCmd(t, "", nil, "check", "--fence", "3", "--file", filepath.Join(t.TempDir(), "f"), "--accept-fence-loss"); code != 64 || !strings.Contains(stderr, "goes with --redis") {
		t.Errorf("--accept-fence-loss with --file: exit %d, %q; want 64", code, stderr)
	}
	for _, flags := range [][]string{
		{"--postgres", "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2", "--resource", "r"},
		{"--redis", "redis://127.0.0.1:1", "--resource", "r"},
	} {
		code, _, stderr := fenceCmd(t, "", nil, append([]string{"check", "--fence", "3"}, flags...)...)
		if code != 69 {
			t.Errorf("fence check %s unreachable: exit %d, %q; want 69", flags[0], code, stderr)
		}
	}
}

// Under dlock run, a COMMAND guards its own write with dlock fence and
// the fence that run exports.
func TestFenceUnderRun(t *testing.T) {
	t.Parallel()
	d := redisDeployment(t, 1)
	file := filepath.Join(t.TempDir(), "out")
	script := `echo "$DLOCK_FENCE" | "$BIN" fence write --file "$FILE" && cat "$FILE.fence"`
	r := dlock(t, []string{"BIN=" + binary(t), "FILE=" + file}, runArgs(d, lockName(t), "--", "sh", "-c", script)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	got, _ := os.ReadFile(file)
	if strings.TrimSpace(string(got)) == "" || strings.TrimSpace(string(got)) != strings.TrimSpace(r.stdout) {
		t.Fatalf("the file holds %q and its fence file %q; want the run's fence in both", got, r.stdout)
	}
}
