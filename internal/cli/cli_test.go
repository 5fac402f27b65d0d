package cli

import (
	"bytes"
	"flag"
	"os/exec"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/cli/bench"
	"github.com/dlock-go/dlock/internal/cli/chaos"
	"github.com/dlock-go/dlock/internal/cli/demo"
	"github.com/dlock-go/dlock/internal/cli/run"
)

// The completion scripts offer every flag of the commands whose flag sets
// are exported, so they cannot fall behind them.
func TestCompletionKnowsFlags(t *testing.T) {
	var (
		ro run.Options
		bo bench.Options
		co chaos.Options
		do demo.Options
	)
	for cmd, fs := range map[string]*flag.FlagSet{"run": run.FlagSet(&ro), "bench": bench.FlagSet(&bo),
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
