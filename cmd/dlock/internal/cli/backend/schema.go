package backend

import (
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/cmdutil"
	"github.com/dlock-go/dlock/mysqllock"
	"github.com/dlock-go/dlock/pglock"
)

const schemaUsage = `Usage: dlock schema postgres|mysql [--table NAME]

Prints the SQL that creates what dlock keeps in a PostgreSQL or MySQL
(MariaDB) database: the table of the locks' rows (with, on PostgreSQL, the
fence sequence and the fences table), as pglock.SchemaSQL and
mysqllock.SchemaSQL give it, and the table of the records of dlock run
--once-per, NAME_runs. dlock creates them itself when the account may;
an administrator runs this SQL for an account that may not, and then
grants it SELECT, INSERT, UPDATE and DELETE on them (USAGE and UPDATE on
the sequence, on PostgreSQL). It connects to nothing.

Exit codes: 0; 64 bad usage.

Flags:
`

// SchemaMain runs "dlock schema".
func SchemaMain(args []string, io cmdutil.IO) int {
	fs := cmdutil.NewFlagSet("dlock schema")
	table := fs.String("table", "", "the table of the locks' rows, name or schema.name, as run's --table (default "+pglock.DefaultTable+")")
	pos, err := cmdutil.Parse(fs, args)
	if errors.Is(err, cmdutil.ErrHelp) {
		cmdutil.PrintUsage(io.Out, schemaUsage, fs)
		return cmdutil.ExitOK
	}
	if err != nil {
		return cmdutil.Fail(io, err, cmdutil.ExitUsage)
	}
	if len(pos) != 1 {
		return cmdutil.Fail(io, cmdutil.Usagef("dlock schema: give the database, postgres or mysql (got %d arguments)", len(pos)), cmdutil.ExitUsage)
	}
	var locks, runs string
	switch pos[0] {
	case "postgres", "postgresql", "--postgres":
		locks, err = pglock.SchemaSQL(*table)
		runs = pgCreateRuns(pgRunsTable(*table))
	case "mysql", "mariadb", "--mysql":
		locks, err = mysqllock.SchemaSQL(*table)
		runs = myCreateRuns(myRunsTable(*table))
	default:
		return cmdutil.Fail(io, cmdutil.Usagef("dlock schema: %s is not a database dlock keeps tables in; give postgres or mysql", cmdutil.Quote(pos[0])), cmdutil.ExitUsage)
	}
	if err != nil {
		return cmdutil.Fail(io, cmdutil.Usagef("--table %s: %s", cmdutil.Quote(*table), cmdutil.Reason(err)), cmdutil.ExitUsage)
	}
	fmt.Fprintf(io.Out, "-- The locks (dlock run, elect, inspect, release).\n%s;\n\n-- The records of dlock run --once-per.\n%s;\n", trimSemicolon(locks), runs)
	return cmdutil.ExitOK
}

// trimSemicolon removes the semicolon and white space that end s.
func trimSemicolon(s string) string {
	for len(s) > 0 && (s[len(s)-1] == ';' || s[len(s)-1] == '\n' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
