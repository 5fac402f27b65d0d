package pglock

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/internal/dblease"
	"github.com/jackc/pgx/v5"
)

// MaxNameBytes is the longest lock or resource name accepted, in bytes.
const MaxNameBytes = 1024

// checkName returns an error naming what is wrong with a lock or resource
// name: what says which.
func checkName(what, name string) error {
	if err := dblease.CheckName("pglock", what, name, MaxNameBytes); err != nil {
		return err
	}
	if strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("pglock: %s name %q contains a NUL byte, which PostgreSQL text cannot hold", what, name)
	}
	return nil
}

// Suffixes of the objects named after a Client's table.
const (
	sequenceSuffix = "_fence_seq"
	fencesSuffix   = "_fences"
	channelSuffix  = "_released"
)

// maxIdentifier is PostgreSQL's limit on an identifier, in bytes
// (NAMEDATALEN - 1); longer ones are truncated, which would make two
// objects one.
const maxIdentifier = 63

// objects are the database objects of one Client, their names quoted for
// SQL text with pgx.Identifier.Sanitize.
type objects struct {
	table    string // the leases
	sequence string // where fences come from; also passed as a parameter cast to regclass
	fences   string // WriteFenced's newest fence per resource
	channel  string // release notices, as pg_notify takes it
	listen   string // channel, quoted, for LISTEN
}

// objectsFor returns the objects of the table called name ("table" or
// "schema.table"), or an error that says what is wrong with the name.
func objectsFor(name string) (objects, error) {
	schema, table, qualified := strings.Cut(name, ".")
	if !qualified {
		schema, table = "", name
	}
	if err := checkIdentifier(name, schema, qualified, maxIdentifier); err != nil {
		return objects{}, err
	}
	if err := checkIdentifier(name, table, true, maxIdentifier-len(sequenceSuffix)); err != nil {
		return objects{}, err
	}
	ident := func(s string) string {
		if !qualified {
			return pgx.Identifier{s}.Sanitize()
		}
		return pgx.Identifier{schema, s}.Sanitize()
	}
	o := objects{
		table:    ident(table),
		sequence: ident(table + sequenceSuffix),
		fences:   ident(table + fencesSuffix),
		channel:  table + channelSuffix,
	}
	o.listen = pgx.Identifier{o.channel}.Sanitize()
	return o, nil
}

// checkIdentifier checks one part of the table name full: part must be
// letters, digits and underscores, not starting with a digit, and at most
// max bytes; an empty part is accepted when !required.
func checkIdentifier(full, part string, required bool, max int) error {
	if part == "" && !required {
		return nil
	}
	ok := part != "" && len(part) <= max && !(part[0] >= '0' && part[0] <= '9')
	for _, r := range part {
		ok = ok && (r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}
	if !ok {
		return fmt.Errorf("pglock: table name %q is not a valid identifier: want \"table\" or \"schema.table\", each part letters, digits and underscores, not starting with a digit, the table at most %d bytes and the schema at most %d",
			full, maxIdentifier-len(sequenceSuffix), maxIdentifier)
	}
	return nil
}

// advisoryKey is the key of the session-mode lock called name on the
// table called table: the first 8 bytes of SHA-256 of both, as a signed
// 64-bit integer, which is what pg_advisory_lock takes.
func advisoryKey(table, name string) int64 {
	h := sha256.Sum256([]byte("pglock\x00" + table + "\x00" + name))
	return int64(binary.BigEndian.Uint64(h[:8]))
}
