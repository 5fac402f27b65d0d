package dlock_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The module's floors, as docs/ARCHITECTURE.md draws them. A package's
// folder is its first path element below the module, or its first two
// under internal/ and cmd/, which are namespaces rather than floors.
var (
	backends = []string{"redislock", "redlock", "zklock", "etcdlock", "pglock", "mysqllock"}
	// top holds what sits above the library: the command, the chaos
	// harness and the observers. Only the command imports them.
	top = []string{"chaos", "dlockprom", "dlockotel"}
	// testOnly are the packages that only tests may import: a package
	// that imports one, test files aside, fails TestImportLayout unless it
	// is one of them (the SQL pair's shared checks start their servers).
	testOnly = []string{"internal/testenv", "internal/dblease/dbleasetest"}
	// noTesting are the packages that shipped code imports for what
	// testOnly gives tests, and which therefore must not import testing.
	noTesting = []string{"internal/servers"}
	// adapters are the Redis Conns: they import redisconn, never the
	// backends that take them.
	adapters = []string{"redislock/goredisconn", "redislock/rueidisconn"}
)

func folder(rel string) string {
	parts := strings.Split(rel, "/")
	if len(parts) > 1 && (parts[0] == "internal" || parts[0] == "cmd") {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// TestImportLayout reads the module's import graph (go list, without the
// tests' imports) and fails when an import points the wrong way: a backend
// importing another backend, a Conn adapter or fence importing a backend,
// the library importing the command, chaos or dlockprom, a package in
// internal/ importing a backend, fence, dlocktest, chaos or dlockprom, a
// package other than a test importing internal/testenv, internal/servers
// importing testing, or a circle between folders. It needs no server.
func TestImportLayout(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to read the import graph: %v", err)
	}
	cmd := exec.Command(gotool, "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.Bytes())
	}
	const module = "github.com/dlock-go/dlock"
	rel := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}

	// edges[from folder][to folder] = the package imports that make it.
	edges := map[string]map[string][]string{}
	var violations []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg, ok := rel(fields[0])
		if !ok {
			continue
		}
		from := folder(pkg)
		for _, imp := range fields[1:] {
			if imp == "testing" && slices.Contains(noTesting, pkg) {
				violations = append(violations, fmt.Sprintf("%s imports testing: shipped code starts its servers through it", pkg))
			}
			dep, ok := rel(imp)
			if !ok {
				continue
			}
			if slices.Contains(testOnly, dep) && !slices.Contains(testOnly, pkg) {
				violations = append(violations, fmt.Sprintf("%s imports %s: only tests import it (use internal/servers)", pkg, dep))
			}
			to := folder(dep)
			if slices.Contains(adapters, pkg) && slices.Contains(backends, to) {
				violations = append(violations, fmt.Sprintf("%s imports %s: a Conn adapter imports a backend", pkg, dep))
			}
			if from == to {
				continue
			}
			if edges[from] == nil {
				edges[from] = map[string][]string{}
			}
			edges[from][to] = append(edges[from][to], pkg+" -> "+dep)
			if why := wrongWay(from, to); why != "" {
				violations = append(violations, fmt.Sprintf("%s imports %s: %s", pkg, dep, why))
			}
		}
	}
	if len(edges) == 0 {
		t.Fatalf("go list ./... listed no imports within %s:\n%s", module, out)
	}
	for _, v := range violations {
		t.Error(v)
	}
	for _, circle := range circles(edges) {
		var how []string
		for _, a := range circle {
			for _, b := range circle {
				how = append(how, edges[a][b]...)
			}
		}
		t.Errorf("the folders %s import each other: %s", strings.Join(circle, ", "), strings.Join(how, "; "))
	}
}

// wrongWay says why an import from folder from to folder to points the
// wrong way, or returns "".
func wrongWay(from, to string) string {
	command := strings.HasPrefix(from, "cmd/")
	switch {
	case slices.Contains(backends, from) && slices.Contains(backends, to):
		return "a backend imports another backend"
	case from == "fence" && slices.Contains(backends, to):
		return "fence imports a backend"
	case slices.Contains(top, to) && !command:
		return "only the command imports " + to
	case strings.HasPrefix(from, "internal/") &&
		(slices.Contains(backends, to) || slices.Contains(top, to) || to == "fence" || to == "dlocktest"):
		return "a package in internal/ imports " + to
	}
	return ""
}

// circles returns the sets of two or more folders that import each other,
// directly or not (the strongly connected components of the folder graph,
// by Tarjan's algorithm), each sorted.
func circles(edges map[string]map[string][]string) [][]string {
	var (
		index   = map[string]int{}
		low     = map[string]int{}
		onStack = map[string]bool{}
		stack   []string
		out     [][]string
		visit   func(v string)
	)
	visit = func(v string) {
		index[v] = len(index)
		low[v] = index[v]
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(edges[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 {
			slices.Sort(scc)
			out = append(out, scc)
		}
	}
	for _, v := range sortedKeys(edges) {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestImportLayoutRules checks wrongWay and circles on imports that the
// module must not have, so that TestImportLayout passing means something.
func TestImportLayoutRules(t *testing.T) {
	for _, c := range []struct {
		from, to string
		wrong    bool
	}{
		{"redlock", "redislock", true},
		{"redislock", "redlock", true},
		{"fence", "redislock", true},
		{"pglock", "fence", false},
		{"redlock", "redisconn", false},
		{"redislock", "internal/redisscript", false},
		{"internal/redisscript", "redislock", true},
		{"internal/sqllease", "dlockprom", true},
		{"redislock", "chaos", true},
		{"internal/lease", "chaos", true},
		{"internal/servers", "dlockprom", true},
		{"internal/testenv", "redislock", true},
		{"internal/quickstart", "redislock", true}, // before issue 34, when it was exempt
		{"examples", "redislock", false},
		{"chaos", "internal/servers", false},
		{"fence", "dlockprom", true},
		{"cmd/dlock", "chaos", false},
		{"cmd/dlock", "redislock", false},
	} {
		if got := wrongWay(c.from, c.to) != ""; got != c.wrong {
			t.Errorf("wrongWay(%q, %q) = %q; want wrong = %v", c.from, c.to, wrongWay(c.from, c.to), c.wrong)
		}
	}

	// Before issue 34: redislock -> internal/redisscript -> redislock/transport.
	edges := map[string]map[string][]string{
		"redislock":            {"internal/redisscript": {"redislock -> internal/redisscript"}, ".": nil},
		"internal/redisscript": {"redislock": {"internal/redisscript -> redislock/transport"}},
		"redlock":              {"internal/redisscript": nil, "redislock": nil},
		"fence":                {".": nil},
	}
	if got, want := circles(edges), [][]string{{"internal/redisscript", "redislock"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("circles = %v; want %v", got, want)
	}
	delete(edges["internal/redisscript"], "redislock")
	if got := circles(edges); len(got) != 0 {
		t.Errorf("circles = %v after the circle was cut; want none", got)
	}
}
