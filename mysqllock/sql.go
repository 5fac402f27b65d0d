package mysqllock

import (
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/internal/dblease"
)

// The statements live in sql/*.sql, each with a header comment that says
// what it does and what its arguments are. {{table}} is replaced by the
// Client's quoted table and {{now}} by the database's UTC clock in
// microseconds; each ? (or ?N, the Nth argument) by an argument, as a
// literal that mysqllock writes itself (see literal), so that each
// statement is one COM_QUERY round trip whatever the DSN's
// interpolateParams says.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// nowMicros is the database's clock in microseconds since 1970, UTC:
// UTC_TIMESTAMP ignores the session's time_zone, and the difference of
// two DATETIMEs has no daylight saving time to trip on. It is the time
// the statement began, the same everywhere in it.
const nowMicros = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

// statements are a Client's SQL texts, with their arguments still to
// fill in (see fill).
type statements struct {
	schema, exists, acquire, create, holder, release, refresh, still string
	sessionGet, sessionKeep, sessionDrop                             string
	sessionRefresh, sessionCheck, sessionUnlock                      string
	inspect, forceUnlock, alive                                      string
	epochNote, epochRead                                             string
}

func newStatements(table string) statements {
	load := dblease.SQLFiles("mysqllock", sqlFiles, strings.NewReplacer("{{table}}", table, "{{now}}", nowMicros))
	return statements{
		schema:         load("schema"),
		exists:         load("exists"),
		acquire:        load("acquire"),
		create:         load("create"),
		holder:         load("holder"),
		release:        load("release"),
		refresh:        load("refresh"),
		still:          load("still"),
		sessionGet:     load("session_get"),
		sessionKeep:    load("session_keep"),
		sessionDrop:    load("session_drop"),
		sessionRefresh: load("session_refresh"),
		sessionCheck:   load("session_check"),
		sessionUnlock:  load("session_unlock"),
		inspect:        load("inspect"),
		forceUnlock:    load("force_unlock"),
		alive:          load("alive"),
		epochNote:      load("epoch_note"),
		epochRead:      load("epoch_read"),
	}
}

// fill returns stmt with each ? replaced by the next argument and each ?N
// by the Nth, as literals.
func fill(stmt string, args ...any) string {
	var b strings.Builder
	next := 0
	for {
		i := strings.IndexByte(stmt, '?')
		if i < 0 {
			b.WriteString(stmt)
			return b.String()
		}
		b.WriteString(stmt[:i])
		stmt = stmt[i+1:]
		j := 0
		for j < len(stmt) && stmt[j] >= '0' && stmt[j] <= '9' {
			j++
		}
		n := next
		if j > 0 {
			n, _ = strconv.Atoi(stmt[:j])
			n--
			stmt = stmt[j:]
		} else {
			next++
		}
		b.WriteString(literal(args[n]))
	}
}

// seconds is a duration that a statement takes in seconds, such as
// GET_LOCK's timeout, written with millisecond precision.
type seconds time.Duration

// literal writes v as SQL: strings as hexadecimal literals (X'…'), which
// reach the server as the bytes given whatever the connection's character
// set and sql_mode, with nothing to escape; lists of strings as such
// literals separated by commas; integers in decimal.
func literal(v any) string {
	switch v := v.(type) {
	case string:
		return "X'" + hex.EncodeToString([]byte(v)) + "'"
	case []string:
		parts := make([]string, len(v))
		for i, s := range v {
			parts[i] = literal(s)
		}
		return strings.Join(parts, ", ")
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case int:
		return strconv.Itoa(v)
	case seconds:
		return strconv.FormatFloat(time.Duration(v).Seconds(), 'f', 3, 64)
	}
	panic(fmt.Sprintf("mysqllock: no literal for %T", v))
}
