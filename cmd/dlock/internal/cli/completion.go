package cli

import (
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
)

// completionFlags lists each command's flags for the completion scripts.
var completionFlags = map[string]string{
	"run":     "--redis --zk --postgres --mysql --etcd --password-file --zk-auth-file --etcd-user --tls-ca --tls-cert --tls-key --tls-server-name --restart-window --session --ttl --wait --kind --permits --conflict-exit-code --grace --max-hold --once-per --leave-children --metrics-addr -v --help",
	"elect":   "--redis --zk --postgres --mysql --etcd --password-file --zk-auth-file --etcd-user --tls-ca --tls-cert --tls-key --tls-server-name --restart-window --ttl --grace --value --again --leader -v --help",
	"inspect": "--redis --zk --postgres --mysql --etcd --password-file --zk-auth-file --etcd-user --tls-ca --tls-cert --tls-key --tls-server-name --restart-window -o --help",
	"release": "--redis --zk --postgres --mysql --etcd --password-file --zk-auth-file --etcd-user --tls-ca --tls-cert --tls-key --tls-server-name --restart-window --force --yes --help",
	"bench":   "--redis --zk --postgres --mysql --etcd --password-file --zk-auth-file --etcd-user --tls-ca --tls-cert --tls-key --tls-server-name --restart-window --session --scenarios --duration --clients --goroutines --hold --kind --permits --ttl -o --chart --prefix --help",
	"chaos":   "--backend --faults --duration --clients --ttl --work --session-timeout --schedule --seed -o --timeline --library-defaults --tls --help",
	"demo":    "--workers --rounds --no-zk --help",
	"fence":   "--fence --file --postgres --mysql --redis --resource --table --password-file --allow-empty --accept-fence-loss --help",
}

const completionCommands = "run elect inspect release fence bench chaos demo completion version help"

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
        --backend) COMPREPLY=($(compgen -W "all redis redis-aof redlock3 redlock5 zk3" -- "$cur")); return ;;
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
	names := []string{"run", "elect", "inspect", "release", "fence", "bench", "chaos", "demo"}
	var cases strings.Builder
	switch args[0] {
	case "bash":
		for _, n := range names {
			fmt.Fprintf(&cases, "        %s) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", n, completionFlags[n])
		}
		fmt.Fprintf(streams.Out, bashCompletion, completionCommands, completionCommands, cases.String())
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
