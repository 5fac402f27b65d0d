package servers

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// debianPackages maps the binaries this package knows about to the Debian
// package that provides them.
var debianPackages = map[string]string{
	"redis-server":    "redis-server",
	"redis-cli":       "redis-tools",
	"redis-benchmark": "redis-tools",
	"redis-check-aof": "redis-tools",
	"redis-check-rdb": "redis-tools",
	"redis-sentinel":  "redis-sentinel",
}

// installHint returns a sentence telling the reader how to install name.
func installHint(name string) string {
	if pkg, ok := debianPackages[filepath.Base(name)]; ok {
		return "install it with: apt-get install -y " + pkg
	}
	return "install the Debian package that provides it"
}

// LookBinary searches for the named executable in the directories named
// by the PATH environment variable and then in /usr/sbin and /usr/bin. It
// returns the path of the executable, or an error that names the Debian
// package to install.
func LookBinary(name string) (string, error) {
	if name == "" {
		return "", errors.New("servers: LookBinary: empty binary name")
	}
	if path, err := exec.LookPath(name); err == nil {
		return path, nil
	}
	if !strings.Contains(name, "/") {
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			path := filepath.Join(dir, name)
			if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
				return path, nil
			}
		}
	}
	return "", fmt.Errorf("servers: %s not found in $PATH, /usr/sbin or /usr/bin; %s", name, installHint(name))
}
