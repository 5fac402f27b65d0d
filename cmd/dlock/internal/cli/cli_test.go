package cli

import (
	"bytes"
	"flag"
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/bench"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/chaos"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/demo"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/run"
)

// The completion scripts offer every flag of the commands whose flag sets
// are exported, so they cannot fall behind them.
func TestCompletionKnowsFlags(t *testing.T) {
	var (
		ro run.Options
		eo run.ElectOptions
		bo bench.Options
		co chaos.Options
		do demo.Options
	)
	for cmd, fs := range map[string]*flag.FlagSet{"run": run.FlagSet(&ro), "elect": run.ElectFlagSet(&eo), "bench": bench.FlagSet(&bo),
		"chaos": chaos.FlagSet(&co), "demo": demo.FlagSet(&do)} {
		offered := " " + completionFlags[cmd] + " "
		fs.VisitAll(func(f *flag.Flag) {
			dashes := "--"
			if len(f.Name) == 1 {
				dashes = "-"
			}
			if !strings.Contains(offered, " "+dashes+f.Name+" ") {
				t.Errorf("completion for %s lacks %s%s", cmd, dashes, f.Name)
			}
		})
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
