package cli

import (
	"bytes"
	"flag"
	"os/exec"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/cli/run"
)

// The completion scripts offer every flag of dlock run, so they cannot
// fall behind it.
func TestCompletionKnowsRunFlags(t *testing.T) {
	var o run.Options
	offered := " " + completionFlags["run"] + " "
	run.FlagSet(&o).VisitAll(func(f *flag.Flag) {
		dashes := "--"
		if len(f.Name) == 1 {
			dashes = "-"
		}
		if !strings.Contains(offered, " "+dashes+f.Name+" ") {
			t.Errorf("completion for run lacks %s%s", dashes, f.Name)
		}
	})
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
