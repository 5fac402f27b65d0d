package cli

import (
	"bytes"
	"flag"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// The completion scripts offer every flag of every command, in each shell.
func TestCompletionKnowsFlags(t *testing.T) {
	scripts := map[string]string{}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out, errb bytes.Buffer
		if code := Main([]string{"completion", shell}, nil, &out, &errb, func(string) string { return "" }); code != 0 {
			t.Fatalf("completion %s: exit %d, %s", shell, code, errb.String())
		}
		scripts[shell] = out.String()
	}
	for cmd, fs := range commandFlags() {
		n := 0
		fs.VisitAll(func(f *flag.Flag) {
			n++
			dashes := "--"
			if len(f.Name) == 1 {
				dashes = "-"
			}
			for shell, script := range scripts {
				// bash and zsh list "--name" among words and quotes;
				// fish says "-l name" or "-o name", one per line.
				word := regexp.MustCompile(`(^|[\s"])` + regexp.QuoteMeta(dashes+f.Name) + `([\s"]|$)`)
				if shell == "fish" {
					opt := "l"
					if dashes == "-" {
						opt = "o"
					}
					word = regexp.MustCompile(`(?m)from ` + cmd + `' -` + opt + " " + regexp.QuoteMeta(f.Name) + `$`)
				}
				if !word.MatchString(script) {
					t.Errorf("%s completion for %s lacks %s%s", shell, cmd, dashes, f.Name)
				}
			}
		})
		if n == 0 {
			t.Errorf("dlock %s has no flags", cmd)
		}
	}
	if !strings.Contains(scripts["bash"], " etcd3 ") {
		t.Errorf("bash completion of --backend lacks etcd3")
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out, errb bytes.Buffer
		if code := Main([]string{"completion", shell}, nil, &out, &errb, func(string) string { return "" }); code != 0 {
			t.Fatalf("completion %s: exit %d, %s", shell, code, errb.String())
		}
		if !strings.Contains(out.String(), "--metrics-addr") && shell != "fish" || shell == "fish" && !strings.Contains(out.String(), "-l metrics-addr") {
			t.Errorf("%s script lacks --metrics-addr", shell)
		}
		if shell == "bash" {
			cmd := exec.Command("bash", "-n")
			cmd.Stdin = &out
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("bash -n: %v\n%s", err, b)
			}
		}
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"completion", "tcsh"}, nil, &out, &errb, func(string) string { return "" }); code != 64 {
		t.Errorf("completion tcsh: exit %d, want 64", code)
	}
}

func TestDescribeVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.25.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.time", Value: "2026-11-25T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	cases := []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{bi, "dlock v1.2.3 (commit 0123456789abcdef, 2026-11-25T10:00:00Z, modified; go1.25.0)"},
		{&debug.BuildInfo{GoVersion: "go1.25.0"}, "dlock (devel) (commit unknown; go1.25.0)"},
		{nil, "dlock (devel) (commit unknown)"},
	}
	for _, c := range cases {
		if got := describeVersion(c.bi); got != c.want {
			t.Errorf("describeVersion = %q, want %q", got, c.want)
		}
	}
}
