// Command dlock runs commands under distributed locks and demonstrates them.
// See "dlock help".
package main

import (
	"os"

	"github.com/dlock-go/dlock/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
