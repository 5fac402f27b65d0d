package fence_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock-go/dlock/fence"
)

// A fence of 2^63-1 written to a file refuses every real holder after it;
// ResetFile sets the record lower and returns the one it replaced, and
// writers from the new record up pass; a record that holds no fence is
// replaced (previous 0); a reset to 0 removes it; what WriteFile refuses,
// ResetFile refuses.
func TestResetFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "report.csv")
	if err := fence.WriteFile(name, math.MaxInt64, []byte("forged"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fence.WriteFile(name, 101, []byte("real"), 0o644); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("WriteFile with 101 after 2^63-1: %v; want ErrStale", err)
	}
	if prev, err := fence.ResetFile(name, 101); err != nil || prev != math.MaxInt64 {
		t.Fatalf("ResetFile to 101: %d, %v; want 2^63-1", prev, err)
	}
	if err := fence.WriteFile(name, 100, []byte("old"), 0o644); !errors.Is(err, fence.ErrStale) {
		t.Errorf("WriteFile with 100 after a reset to 101: %v; want ErrStale", err)
	}
	if err := fence.WriteFile(name, 101, []byte("real"), 0o644); err != nil {
		t.Errorf("WriteFile with 101 after a reset to 101: %v", err)
	}
	if err := os.WriteFile(name+fence.FileSuffix, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if prev, err := fence.ResetFile(name, 120); err != nil || prev != 0 {
		t.Errorf("ResetFile of a fence file holding garbage: %d, %v; want 0", prev, err)
	}
	if b, _ := os.ReadFile(name + fence.FileSuffix); string(b) != "120\n" {
		t.Errorf("the fence file holds %q after the reset; want 120", b)
	}
	if prev, err := fence.ResetFile(name, 0); err != nil || prev != 120 {
		t.Errorf("ResetFile to 0: %d, %v; want 120", prev, err)
	}
	if _, err := os.Lstat(name + fence.FileSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the fence file after a reset to 0: %v; want it removed", err)
	}
	if err := fence.WriteFile(name, 5, []byte("five"), 0o644); err != nil {
		t.Errorf("WriteFile with 5 after a reset to 0: %v", err)
	}
	if _, err := fence.ResetFile(name+fence.FileSuffix, 1); err == nil || !strings.Contains(err.Error(), fence.FileSuffix) {
		t.Errorf("ResetFile of a fence file: %v; want an error", err)
	}
	elsewhere := filepath.Join(t.TempDir(), "held")
	os.WriteFile(elsewhere, []byte("1\n"), 0o644)
	os.Remove(name + fence.FileSuffix)
	if err := os.Symlink(elsewhere, name+fence.FileSuffix); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.ResetFile(name, 9); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("ResetFile with a symbolic link for a fence file: %v; want an error", err)
	}
	if b, _ := os.ReadFile(elsewhere); string(b) != "1\n" {
		t.Errorf("the link's target holds %q; want it unchanged", b)
	}
}
