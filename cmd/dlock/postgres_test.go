package main_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

func pgDeployment(t testing.TB, session bool) deployment {
	srv := sharedPostgres(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	d := deployment{flags: []string{"--postgres", srv.URL()}}
	if session {
		d.runFlags = []string{"--session"}
	}
	d.held = func(t testing.TB, name string) bool {
		var n int
		err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pglock.DefaultTable+" WHERE name = $1 AND token <> '' AND expires_at > now()", name).Scan(&n)
		if err != nil && !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("reading the lock's row: %v", err)
		}
		return n > 0
	}
	d.sabotage = func(t testing.TB, name string) {
		if _, err := conn.Exec(ctx, "DELETE FROM "+pglock.DefaultTable+" WHERE name = $1", name); err != nil {
			t.Fatalf("deleting the lock's row: %v", err)
		}
	}
	return d
}

// dlock run, inspect and release --force on PostgreSQL, in lease mode and
// in session mode, pass what they pass on the other backends.
func TestIntegrationPostgres(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name    string
		session bool
	}{{"Lease", false}, {"Session", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			d := pgDeployment(t, mode.session)
			t.Run("SerialisedAppends", func(t *testing.T) { serialisedAppends(t, d) })
			t.Run("ExitCodeAndEnvironment", func(t *testing.T) { exitCodeAndEnvironment(t, d) })
			t.Run("ConflictAndInterrupt", func(t *testing.T) { conflictAndInterrupt(t, d) })
			t.Run("LossKillsCommand", func(t *testing.T) { lossKillsCommand(t, d, false) })
			t.Run("MaxHoldStopsCommand", func(t *testing.T) { maxHoldStopsCommand(t, d) })
			t.Run("CommandNotFound", func(t *testing.T) { commandNotFound(t, d) })
			t.Run("InspectAndForceRelease", func(t *testing.T) { inspectAndForceRelease(t, d) })
		})
	}
	t.Run("Refusals", func(t *testing.T) {
		d := pgDeployment(t, false)
		for _, args := range [][]string{
			runArgs(d, "--kind", "fair", "x", "--", "true"),
			runArgs(d, "--ttl", "25h", "x", "--", "true"),
		} {
			if r := dlock(t, nil, args...); r.code != 64 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("dlock %v: exit %d, %q; want 64 on one line", args[0], r.code, r.stderr)
			}
		}
		wrong := strings.Replace(d.flags[1], "postgres://"+testenv.PostgresUser+"@", "postgres://nobody@", 1)
		if r := dlock(t, nil, "run", "--postgres", wrong, "x", "--", "true"); r.code != 64 || !strings.Contains(r.stderr, "DLOCK_POSTGRES") {
			t.Errorf("an unknown role: exit %d, %q; want 64 naming DLOCK_POSTGRES", r.code, r.stderr)
		}
		// -v says what TLS the connection negotiated: none, here.
		if r := dlock(t, nil, "run", "-v", "--postgres", d.flags[1], "tls-"+lockName(t), "--", "true"); r.code != 0 || !strings.Contains(r.stderr, "(no TLS)") {
			t.Errorf("run -v: exit %d, %q; want it to say the connection has no TLS", r.code, r.stderr)
		}
		// DLOCK_POSTGRES alone names the service, and COMMAND does not see it.
		r := dlock(t, []string{"DLOCK_POSTGRES=" + d.flags[1]}, "run", "env-"+lockName(t), "--", "sh", "-c", `echo "[$DLOCK_POSTGRES]"`)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
			t.Errorf("DLOCK_POSTGRES: exit %d, stdout %q, stderr %q; want 0 and COMMAND without it", r.code, r.stdout, r.stderr)
		}
	})
}
