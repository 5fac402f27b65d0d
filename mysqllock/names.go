package mysqllock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/internal/dblease"
)

// MaxNameBytes is the longest lock name accepted, in bytes.
const MaxNameBytes = 1024

// checkName returns an error naming what is wrong with a lock name.
func checkName(name string) error { return dblease.CheckName("mysqllock", "lock", name, MaxNameBytes) }

// maxIdentifier is MySQL's limit on a table or database name, in
// characters (here, bytes: only ASCII is accepted).
const maxIdentifier = 64

// quoteTable checks the table name full ("table" or "database.table") and
// returns it quoted for SQL text, or an error that says what is wrong.
func quoteTable(full string) (string, error) {
	parts := strings.Split(full, ".")
	ok := len(parts) <= 2
	for _, p := range parts {
		ok = ok && p != "" && len(p) <= maxIdentifier && !(p[0] >= '0' && p[0] <= '9')
		for _, r := range p {
			ok = ok && (r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}
	}
	if !ok {
		return "", fmt.Errorf("mysqllock: table name %q is not a valid identifier: want \"table\" or \"database.table\", each part letters, digits and underscores, not starting with a digit, at most %d bytes",
			full, maxIdentifier)
	}
	return "`" + strings.Join(parts, "`.`") + "`", nil
}

// sessionLockName returns the GET_LOCK name of the session-mode lock
// called name on the table called table. GET_LOCK names are limited to
// 64 characters and compared without regard to case in MySQL 5.7 and
// later, so lock names are hashed: "dlock:" and the first 20 bytes of the
// SHA-256 of "mysqllock", the table and the name, separated by NUL
// bytes, in hex (46 characters).
func sessionLockName(table, name string) string {
	h := sha256.Sum256([]byte("mysqllock\x00" + table + "\x00" + name))
	return "dlock:" + hex.EncodeToString(h[:20])
}
