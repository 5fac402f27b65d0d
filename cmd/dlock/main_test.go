package main_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// The dlock binary the tests run, built on first use by binary.
var (
	buildOnce sync.Once
	binDir    string
	dlockBin  string
	buildErr  error
)

// binary returns the path of the dlock binary, building it the first time.
// Every test here runs the built binary, which takes seconds to build, so
// binary skips its test under -short.
func binary(t testing.TB) string {
	t.Helper()
	testenv.SkipIfShort(t, "builds and runs the dlock binary")
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "dlock-bin-"); buildErr != nil {
			return
		}
		dlockBin = filepath.Join(binDir, "dlock")
		build := exec.Command("go", "build", "-o", dlockBin, ".")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building dlock: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return dlockBin
}

// parallel is how many tests run at once unless -test.parallel says
// otherwise. The tests here mostly wait, on dlock processes, TTLs, --wait
// and servers that go away and come back, not on the CPU: the default,
// GOMAXPROCS (2 on CI), left the package at 4-8 minutes.
const parallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(max(parallel, runtime.GOMAXPROCS(0))))
	}
	code := m.Run()
	if err := testenv.StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "StopAll:", err)
		code = 1
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
