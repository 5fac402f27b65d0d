package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// dlockBin is the dlock binary the tests run, built once by TestMain.
var dlockBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dlock-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dlockBin = filepath.Join(dir, "dlock")
	build := exec.Command("go", "build", "-o", dlockBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dlock:", err)
		os.Exit(1)
	}
	code := m.Run()
	if err := testenv.StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "StopAll:", err)
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
