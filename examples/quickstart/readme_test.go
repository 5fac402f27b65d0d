package main

import (
	"os"
	"strings"
	"testing"
)

// The README's quick start is this package's main.go, which the build
// compiles and vet checks: a copy that drifts from it fails here.
func TestReadmeQuickStartIsMainGo(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Quick start\n\n```go\n")
	block, _, closed := strings.Cut(rest, "```\n")
	if !ok || !closed {
		t.Fatal("README.md has no ```go block under ## Quick start")
	}
	if block != string(code) {
		t.Errorf("README.md's quick start differs from examples/quickstart/main.go; copy main.go into the README:\n%s", block)
	}
}
