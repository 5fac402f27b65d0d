package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/fence"
)

// distinctNames differ only in trailing blanks, case, or Unicode forms
// that some collations compare equal.
var distinctNames = []string{"acct", "acct ", "acct  ", "Acct", "ACCT", "acct\t", "acct\u00a0", "ss", "ß", "\u00e9", "e\u0301", "ａcct"}

// Resource names that differ never share a fence, in the guard's own
// table on every dialect: a current holder of "acct " is not refused
// because "acct" has a higher fence (MySQL's utf8mb4_bin compares with
// PAD SPACE). In a table whose resource column merges names (a PAD SPACE
// or case-insensitive collation, made before or by hand), a write to a
// name the column merges with another is an error, neither accepted nor
// stale, and changes nothing.
func TestIntegrationSQLDistinctNames(t *testing.T) {
	noop := func(context.Context, *sql.Tx) error { return nil }
	for _, d := range databases {
		t.Run(d.name, func(t *testing.T) {
			db := d.open(t)
			ctx := ctxFor(t, time.Minute)
			table := unique("fences")
			g := fence.NewSQL(d.dialect, fence.WithTable(table))
			if err := g.Migrate(ctx, db); err != nil {
				t.Fatal(err)
			}
			if err := g.WriteFenced(ctx, db, distinctNames[0], 1000, noop); err != nil {
				t.Fatal(err)
			}
			for i, name := range distinctNames[1:] {
				if err := g.WriteFenced(ctx, db, name, uint64(i+1), noop); err != nil {
					t.Errorf("the first write to %q, with fence %d, after fence 1000 for %q: %v", name, i+1, distinctNames[0], err)
				}
			}
			if n := scalar(t, db, "SELECT COUNT(*) FROM "+table); n != int64(len(distinctNames)) {
				t.Errorf("the table holds %d rows; want one for each of %d names", n, len(distinctNames))
			}
			for i, name := range distinctNames[1:] {
				if err := g.WriteFenced(ctx, db, name, uint64(i+1), noop); err != nil {
					t.Errorf("%q with its own fence %d: %v", name, i+1, err)
				}
			}
			if err := g.WriteFenced(ctx, db, distinctNames[0], 999, noop); !errors.Is(err, fence.ErrStale) {
				t.Errorf("%q with fence 999 after 1000: %v; want ErrStale", distinctNames[0], err)
			}

			var merging []string // columns that compare some distinct names equal
			switch d.dialect {
			case fence.MySQL:
				merging = []string{
					"varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", // the Schema of before: PAD SPACE
					"varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
				}
			case fence.Postgres:
				coll := unique("nocase")
				execSQL(t, db, "CREATE COLLATION "+coll+" (provider = icu, locale = 'und-u-ks-level2', deterministic = false)")
				t.Cleanup(func() { db.Exec("DROP COLLATION " + coll + " CASCADE") })
				merging = []string{"text COLLATE " + coll}
			case fence.SQLite:
				merging = []string{"text COLLATE NOCASE", "text COLLATE RTRIM"}
			}
			for _, column := range merging {
				table := unique("merging")
				execSQL(t, db, "CREATE TABLE "+table+" (resource "+column+" NOT NULL PRIMARY KEY, fence bigint NOT NULL)")
				g := fence.NewSQL(d.dialect, fence.WithTable(table))
				if err := g.WriteFenced(ctx, db, "acct", 1000, noop); err != nil {
					t.Fatal(err)
				}
				merged := 0
				for _, name := range []string{"acct ", "Acct"} {
					err := g.WriteFenced(ctx, db, name, 1, noop)
					if err == nil {
						continue // this column tells these two apart
					}
					merged++
					if errors.Is(err, fence.ErrStale) || !strings.Contains(err.Error(), "byte for byte") {
						t.Errorf("column %s: %q after \"acct\": %v; want an error saying the column merges them", column, name, err)
					}
					t.Logf("column %s: %v", column, err)
					if err := g.WriteFenced(ctx, db, name, 2000, noop); err == nil || errors.Is(err, fence.ErrStale) {
						t.Errorf("column %s: %q with fence 2000: %v; want an error", column, name, err)
					}
				}
				if merged == 0 {
					t.Errorf("column %s merged neither name with \"acct\"; the test needs one that does", column)
				}
				fences := map[string]int64{}
				rows, err := db.QueryContext(ctx, "SELECT resource, fence FROM "+table)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var r string
					var f int64
					if err := rows.Scan(&r, &f); err != nil {
						t.Fatal(err)
					}
					fences[r] = f
				}
				rows.Close()
				if len(fences) != 3-merged || fences["acct"] != 1000 {
					t.Errorf("column %s: the table holds %v after the refused writes; want acct at 1000 and only the names it told apart", column, fences)
				}
			}
		})
	}
}
