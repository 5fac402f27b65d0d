package pglock

import (
	"embed"
	"strings"
)

// The statements live in sql/*.sql, each with a header comment that says
// what it does and what its parameters are. Identifiers are not
// parameters in PostgreSQL: {{table}}, {{sequence}} and {{fences}} are
// replaced by the Client's quoted names; every value is a parameter.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// statements are a Client's SQL texts.
type statements struct {
	schema, exists                                 string
	ensure, acquire, release, refresh              string
	sessionAcquire, sessionRefresh, sessionRelease string
	fence                                          string
	inspect, forceUnlock, terminate, advisoryHeld  string
	electPublish, electRead, electWithdraw         string
}

func newStatements(o objects) statements {
	r := strings.NewReplacer("{{table}}", o.table, "{{sequence}}", o.sequence, "{{fences}}", o.fences)
	load := func(name string) string {
		b, err := sqlFiles.ReadFile("sql/" + name + ".sql")
		if err != nil {
			panic("pglock: missing embedded sql/" + name + ".sql")
		}
		return r.Replace(stripHeader(string(b)))
	}
	return statements{
		schema:         load("schema"),
		exists:         load("exists"),
		ensure:         load("ensure"),
		acquire:        load("acquire"),
		release:        load("release"),
		refresh:        load("refresh"),
		sessionAcquire: load("session_acquire"),
		sessionRefresh: load("session_refresh"),
		sessionRelease: load("session_release"),
		fence:          load("fence"),
		inspect:        load("inspect"),
		forceUnlock:    load("force_unlock"),
		terminate:      load("terminate"),
		advisoryHeld:   load("advisory_held"),
		electPublish:   load("elect_publish"),
		electRead:      load("elect_read"),
		electWithdraw:  load("elect_withdraw"),
	}
}

// stripHeader drops a file's leading comment lines: they are for the
// reader of the file, not for every round trip and pg_stat_activity.
// Comments further down (the schema's) stay.
func stripHeader(text string) string {
	for strings.HasPrefix(text, "--") {
		_, rest, _ := strings.Cut(text, "\n")
		text = rest
	}
	return strings.TrimSpace(text)
}
