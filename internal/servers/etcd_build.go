package servers

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EtcdBuildVersion is the etcd release that BuildEtcd builds: one newer than
// Debian's 3.4.23, with the server's own guard against a deposed leader
// renewing leases (ensureLeadership, etcd 3.4.31, 3.5.13 and 3.6.0).
const EtcdBuildVersion = "3.6.16"

// The module that BuildEtcd builds etcd in: its go.mod and go.sum, kept as
// text files here (a go.mod would make the folder a module of its own,
// which go:embed cannot reach), pin etcd's server and every dependency.
var (
	//go:embed etcdbuild/go.mod.txt
	etcdBuildMod []byte
	//go:embed etcdbuild/go.sum.txt
	etcdBuildSum []byte
)

// etcdBuildTools makes the module require the server package, so that
// go mod tidy, run by hand when EtcdBuildVersion changes, keeps its
// dependencies.
const etcdBuildTools = `//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
`

var etcdBuild struct {
	once sync.Once
	path string
	err  error
}

// BuildEtcd returns the path of an etcd server binary of EtcdBuildVersion,
// built from its Go modules (through the module proxy, or the module
// cache) on first use into the user's cache directory and kept there, so
// that a machine builds it once: about two minutes on two cores. Test
// binaries of several packages that build it at once take turns under a
// file lock. A change of the pinned modules builds it again.
func BuildEtcd() (string, error) {
	etcdBuild.once.Do(func() { etcdBuild.path, etcdBuild.err = buildEtcd() })
	return etcdBuild.path, etcdBuild.err
}

func buildEtcd() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("servers: building etcd %s: %w", EtcdBuildVersion, err)
	}
	sum := sha256.Sum256(append(append([]byte(runtime.Version()), etcdBuildMod...), etcdBuildSum...))
	dir := filepath.Join(cache, "dlock-testenv")
	bin := filepath.Join(dir, fmt.Sprintf("etcd-v%s-%s", EtcdBuildVersion, hex.EncodeToString(sum[:6])))
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("servers: building etcd %s: %w", EtcdBuildVersion, err)
	}
	lock, err := os.OpenFile(bin+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("servers: building etcd %s: %w", EtcdBuildVersion, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("servers: building etcd %s: locking %s: %w", EtcdBuildVersion, lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if isExecutable(bin) { // another test binary built it meanwhile
		return bin, nil
	}
	src, err := os.MkdirTemp("", "testenv-etcdbuild-")
	if err != nil {
		return "", fmt.Errorf("servers: building etcd %s: %w", EtcdBuildVersion, err)
	}
	defer os.RemoveAll(src)
	for name, data := range map[string][]byte{"go.mod": etcdBuildMod, "go.sum": etcdBuildSum, "tools.go": []byte(etcdBuildTools)} {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			return "", fmt.Errorf("servers: building etcd %s: %w", EtcdBuildVersion, err)
		}
	}
	tmp := bin + ".tmp"
	start := time.Now()
	cmd := exec.Command(goTool(), "build", "-o", tmp, "go.etcd.io/etcd/server/v3")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("servers: building etcd %s from its Go modules: %w\n%s", EtcdBuildVersion, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("servers: building etcd %s: %w", EtcdBuildVersion, err)
	}
	fmt.Fprintf(os.Stderr, "servers: built etcd %s in %v: %s\n", EtcdBuildVersion, time.Since(start).Round(time.Second), bin)
	return bin, nil
}

// goTool returns the go command of the toolchain that built the test,
// or "go" from $PATH.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); isExecutable(p) {
		return p
	}
	return "go"
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// EtcdVersion returns the version that the etcd binary bin reports, such
// as "3.4.23".
func EtcdVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("servers: %s --version: %w", bin, err)
	}
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(line, "etcd Version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", errors.New("servers: " + bin + " --version names no version")
}
