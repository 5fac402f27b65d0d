package pglock

import (
	"embed"
	"strings"

	"github.com/dlock-go/dlock/internal/dblease"
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
	load := dblease.SQLFiles("pglock", sqlFiles, strings.NewReplacer("{{table}}", o.table, "{{sequence}}", o.sequence, "{{fences}}", o.fences))
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
