package cli

import (
	"flag"
	"fmt"
	"strings"

	dchaos "github.com/dlock-go/dlock/chaos"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/bench"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/chaos"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/demo"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/fencecmd"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/inspect"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/run"
)

// commandFlags returns each command's flag set, made as the command makes
// it, so that the completion scripts offer every flag a backend or a
// command registers.
func commandFlags() map[string]*flag.FlagSet {
	var (
		ro run.Options
		eo run.ElectOptions
		bo bench.Options
		co chaos.Options
		do demo.Options
	)
	return map[string]*flag.FlagSet{
		"run": run.FlagSet(&ro), "elect": run.ElectFlagSet(&eo),
		"inspect": inspect.FlagSet(), "release": inspect.ReleaseFlagSet(),
		"list":  inspect.ListFlagSet(),
		"fence": fencecmd.FlagSet(), "bench": bench.FlagSet(&bo),
		"chaos": chaos.FlagSet(&co), "demo": demo.FlagSet(&do),
	}
}

// completionFlags returns the flags of each command, as the completion
// scripts offer them: "--name", or "-x" for a one-letter flag, and --help.
func completionFlags() map[string]string {
	out := map[string]string{}
	for cmd, fs := range commandFlags() {
		var names []string
		fs.VisitAll(func(f *flag.Flag) {
			if len(f.Name) == 1 {
				names = append(names, "-"+f.Name)
			} else {
				names = append(names, "--"+f.Name)
			}
		})
		out[cmd] = strings.Join(append(names, "--help"), " ")
	}
	return out
}

const completionCommands = "run elect inspect release list fence schema bench chaos demo completion version help"

const bashCompletion = `# bash completion for dlock; load with: source <(dlock completion bash)
_dlock() {
    local cur prev cmd
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    cmd="${COMP_WORDS[1]}"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "%s" -- "$cur")); return
    fi
    case "$prev" in
        --kind) COMPREPLY=($(compgen -W "mutex fair read write semaphore" -- "$cur")); return ;;
        -o) COMPREPLY=($(compgen -W "table json" -- "$cur")); return ;;
        --backend) COMPREPLY=($(compgen -W "%s" -- "$cur")); return ;;
        --schedule) COMPREPLY=($(compgen -W "cycle random" -- "$cur")); return ;;
        --wait) COMPREPLY=($(compgen -W "0 10s 1m forever" -- "$cur")); return ;;
        completion) COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")); return ;;
        help) COMPREPLY=($(compgen -W "%s" -- "$cur")); return ;;
    esac
    local i
    for ((i = 2; i < COMP_CWORD; i++)); do
        if [ "${COMP_WORDS[i]}" = "--" ]; then COMPREPLY=($(compgen -c -- "$cur")); return; fi
    done
    case "$cmd" in
%s    esac
}
complete -F _dlock dlock
`

const zshCompletion = `#compdef dlock
# zsh completion for dlock; load with: source <(dlock completion zsh)
_dlock() {
    if (( CURRENT == 2 )); then
        compadd -- %s; return
    fi
    case "$words[CURRENT-1]" in
        --kind) compadd -- mutex fair read write semaphore; return ;;
        -o) compadd -- table json; return ;;
        completion) compadd -- bash zsh fish; return ;;
    esac
    if (( ${words[(I)--]} )); then _command_names; return; fi
    case "$words[2]" in
%s    esac
}
compdef _dlock dlock
`

const fishCompletion = `# fish completion for dlock; load with: dlock completion fish | source
complete -c dlock -f
complete -c dlock -n '__fish_use_subcommand' -a '%s'
complete -c dlock -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'
complete -c dlock -n '__fish_seen_subcommand_from run bench' -l kind -xa 'mutex fair read write semaphore'
%s`

// completionMain prints a completion script for the shell named in args.
func completionMain(args []string, streams cmdutil.IO) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(streams.Out, "Usage: dlock completion bash|zsh|fish\n\nPrints a completion script. bash: source <(dlock completion bash); zsh: source <(dlock completion zsh); fish: dlock completion fish | source")
		return cmdutil.ExitOK
	}
	if len(args) != 1 {
		return cmdutil.Fail(streams, cmdutil.Usagef("dlock completion: name one shell: bash, zsh or fish"), cmdutil.ExitUsage)
	}
	names := []string{"run", "elect", "inspect", "release", "list", "fence", "bench", "chaos", "demo"}
	completionFlags := completionFlags()
	var cases strings.Builder
	switch args[0] {
	case "bash":
		for _, n := range names {
			fmt.Fprintf(&cases, "        %s) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", n, completionFlags[n])
		}
		fmt.Fprintf(streams.Out, bashCompletion, completionCommands, "all "+strings.Join(dchaos.Backends, " "), completionCommands, cases.String())
	case "zsh":
		for _, n := range names {
			fmt.Fprintf(&cases, "        %s) compadd -- %s ;;\n", n, completionFlags[n])
		}
		fmt.Fprintf(streams.Out, zshCompletion, completionCommands, cases.String())
	case "fish":
		for _, n := range names {
			for _, f := range strings.Fields(completionFlags[n]) {
				opt := "-l " + strings.TrimLeft(f, "-")
				if !strings.HasPrefix(f, "--") {
					opt = "-o " + strings.TrimLeft(f, "-")
				}
				fmt.Fprintf(&cases, "complete -c dlock -n '__fish_seen_subcommand_from %s' %s\n", n, opt)
			}
		}
		fmt.Fprintf(streams.Out, fishCompletion, completionCommands, cases.String())
	default:
		return cmdutil.Fail(streams, cmdutil.Usagef("dlock completion: %q is not a shell dlock knows; use bash, zsh or fish", args[0]), cmdutil.ExitUsage)
	}
	return cmdutil.ExitOK
}
