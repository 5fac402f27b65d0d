package fence_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/fence"
)

// A Row without a Dialect, or with a Table that needs quoting, says which
// of the two is wrong, before it touches the database.
func TestRowRefusesBadFields(t *testing.T) {
	for _, c := range []struct {
		row  fence.Row
		want string
	}{
		{fence.Row{}, "needs a Dialect: fence.Postgres"},
		{fence.Row{Table: "stock"}, "needs a Dialect: fence.Postgres"},
		{fence.Row{Dialect: fence.SQLite}, `Table "" is not a table name`},
		{fence.Row{Dialect: fence.SQLite, Table: "a b"}, `Table "a b" is not a table name`},
	} {
		err := c.row.Update(context.Background(), nil, 1, 5, "qty = ?", 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Update: %v; want an error with %q", c.row, err, c.want)
		}
	}
}
