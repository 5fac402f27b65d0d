package fence_test

import (
	"database/sql"
	"os"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
)

func init() {
	databases = append(databases, struct {
		name    string
		dialect fence.Dialect
		open    func(t testing.TB) *sql.DB
	}{"MariaDB", fence.MySQL, mariaDB})
}

var (
	mariaOnce sync.Once
	mariaSrv  *testenv.MariaDB
	mariaErr  error
)

// mariaDB opens the shared MariaDB server's test database, starting the
// server if need be.
func mariaDB(t testing.TB) *sql.DB {
	t.Helper()
	testenv.SkipIfShort(t, "needs MariaDB")
	if err := testenv.LookMariaDB(); err != nil {
		if ci := os.Getenv("CI"); ci != "true" && ci != "1" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	mariaOnce.Do(func() { mariaSrv, mariaErr = testenv.LaunchMariaDB() })
	if mariaErr != nil {
		t.Fatal(mariaErr)
	}
	return openDB(t, "mysql", mariaSrv.DSN())
}
