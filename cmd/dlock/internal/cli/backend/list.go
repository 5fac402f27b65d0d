package backend

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/mysqllock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lister finds the names of the locks that may be held, of those whose
// names start with a prefix: a superset, which List then inspects one by
// one. Every backend's conn is one.
type lister interface {
	names(ctx context.Context, prefix string) ([]string, error)
}

// MaxListed bounds how many names List inspects.
const MaxListed = 10000

// List reports the locks held whose names start with prefix, in the order
// of their names: what Inspect reports of each. On ZooKeeper it lists
// the names under /dlock (the paths of names that do not start with a
// slash), not absolute paths elsewhere.
func (t *Target) List(ctx context.Context, prefix string) ([]Report, error) {
	l, ok := t.c.(lister)
	if !ok {
		return nil, fmt.Errorf("%w: %s cannot list its locks", errNoList, t.drv.title)
	}
	names, err := l.names(ctx, prefix)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > MaxListed {
		return nil, fmt.Errorf("more than %d names start with %q; give a longer prefix", MaxListed, prefix)
	}
	out := []Report{}
	for _, name := range names {
		if !strings.HasPrefix(name, prefix) || CheckName(t.Kind(), name) != nil {
			continue
		}
		r, err := t.Inspect(ctx, name)
		if err != nil {
			return out, fmt.Errorf("inspecting %q: %w", name, err)
		}
		if r.Held {
			out = append(out, r)
		}
	}
	return out, nil
}

// errNoList is the error of List on a backend that cannot list its locks.
var errNoList = errors.New("no listing")

// IsNoList reports whether err is List's on a backend that cannot list
// its locks.
func IsNoList(err error) bool { return errors.Is(err, errNoList) }

// redisNames scans every server (every master of a Cluster) for dlock's
// keys of names starting with prefix, dlock:{name} and dlock:{name}:...,
// and returns the names. A name has no brace (rediskeys.CheckName), so
// the first } ends it.
func (s redisServers) names(ctx context.Context, prefix string) ([]string, error) {
	if strings.ContainsAny(prefix, "{}") {
		return nil, nil // no name has a brace
	}
	match := "dlock:{" + globEscape(prefix) + "*"
	var (
		out  []string
		errs []error
	)
	scan := func(ctx context.Context, rdb redis.Cmdable) error {
		iter := rdb.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			rest := strings.TrimPrefix(iter.Val(), "dlock:{")
			if name, _, ok := strings.Cut(rest, "}"); ok {
				out = append(out, name)
			}
			if len(out) > 4*MaxListed {
				break
			}
		}
		return iter.Err()
	}
	for i, rdb := range s.rdbs {
		var err error
		if c, ok := rdb.(*redis.ClusterClient); ok {
			var mu sync.Mutex
			err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				mu.Lock() // one master at a time: scan appends to out
				defer mu.Unlock()
				return scan(ctx, m)
			})
		} else {
			err = scan(ctx, rdb)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: SCAN: %w", s.addrs[i], err))
		}
	}
	// With Redlock a name held by a majority is on some master that
	// answered as long as a majority answered.
	if len(errs) > 0 && len(errs) > (len(s.rdbs)-1)/2 {
		return nil, joinErrs(errs)
	}
	return out, nil
}

// globEscape escapes the characters Redis's glob patterns (SCAN MATCH)
// give a meaning outside brackets: * ? [ ] \.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// names walks the tree under the root of relative names, /dlock (below
// the chroot), from the deepest node the prefix names whole, and returns
// the name of every node with children.
func (z *zkConn) names(ctx context.Context, prefix string) ([]string, error) {
	root := z.chroot + ZKRoot
	dir, _ := path.Split(prefix)
	start := strings.TrimSuffix(root+"/"+strings.TrimSuffix(dir, "/"), "/")
	if strings.HasPrefix(prefix, "/") {
		return nil, nil // absolute paths are not listed
	}
	c := z.c.Conn()
	var out []string
	var walk func(p string) error
	walk = func(p string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		kids, _, err := c.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing the children of %s: %w", p, err)
		}
		if len(kids) > 0 && p != root {
			out = append(out, strings.TrimPrefix(p, root+"/"))
		}
		if len(out) > MaxListed {
			return nil
		}
		for _, k := range kids {
			child := p + "/" + k
			if name := strings.TrimPrefix(child, root+"/"); !strings.HasPrefix(name, prefix) && !strings.HasPrefix(prefix, name+"/") {
				continue
			}
			if err := walk(child); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(start)
}

// names reads the keys, only the keys, starting with prefix, and returns
// the name of each that is a lock's (see etcdlock's layout: name/<lease>,
// name/read/<lease>, name/write/<lease>, name/permits-<n>/<lease>), both
// readings where a key could be two names' ("a/read/<lease>": a's
// reader, or a/read's mutex). Keys of other programs that look like a
// lock's are inspected and shown as what they look like.
func (e *etcdConn) names(ctx context.Context, prefix string) ([]string, error) {
	resp, err := e.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(8*MaxListed))
	if err != nil {
		return nil, fmt.Errorf("reading the keys starting with %q: %w", prefix, err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		i := strings.LastIndexByte(k, '/')
		if i <= 0 || strings.HasPrefix(k, EtcdRunsPrefix) {
			continue
		}
		name := k[:i]
		out = append(out, name)
		if j := strings.LastIndexByte(name, '/'); j > 0 {
			if d := name[j+1:]; d == "read" || d == "write" || strings.HasPrefix(d, "permits-") {
				out = append(out, name[:j])
			}
		}
	}
	return out, nil
}

// names selects the names of the rows that a holder's token marks.
func (p *pgConn) names(ctx context.Context, prefix string) ([]string, error) {
	rows, err := p.pool.Query(ctx, `SELECT name FROM `+p.table+` WHERE token <> '' AND substr(name, 1, length($1)) = $1 LIMIT `+fmt.Sprint(MaxListed+1), prefix)
	if err == nil {
		var out []string
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err == nil {
			return out, nil
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table: no lock was ever taken
		return nil, nil
	}
	return nil, fmt.Errorf("reading %s: %w", p.table, err)
}

// names selects the names of the rows that a holder's token marks.
func (m *myConn) names(ctx context.Context, prefix string) ([]string, error) {
	rows, err := m.db.QueryContext(ctx, "SELECT name FROM "+m.table+" WHERE token <> '' AND SUBSTRING(name, 1, LENGTH(?)) = ? LIMIT "+fmt.Sprint(MaxListed+1), prefix, prefix)
	var out []string
	if err == nil {
		defer rows.Close()
		for rows.Next() {
			var name []byte
			if err = rows.Scan(&name); err != nil {
				break
			}
			out = append(out, string(name))
		}
		err = cmp.Or(err, rows.Err())
	}
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &me) && me.Number == 1146: // no such table: no lock was ever taken
		return nil, nil
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	}
	return nil, fmt.Errorf("reading %s: %w", m.table, err)
}

func pgTable(table string) string {
	return pgx.Identifier(strings.Split(cmp.Or(table, pglock.DefaultTable), ".")).Sanitize()
}

func myTable(table string) string {
	return "`" + strings.Join(strings.Split(cmp.Or(table, mysqllock.DefaultTable), "."), "`.`") + "`"
}
