package servers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// A new PostgreSQL or MariaDB server's data directory is made by initdb or
// mariadb-install-db, which take seconds of CPU (2-8s for MariaDB on a
// loaded 2-core machine), and come out the same every time: so the first
// one a machine makes is kept in the user's cache directory, beside
// BuildEtcd's binaries, and copied into every later server's directory
// (under a second). A template is keyed by the programs that made it
// (path, size and modification time, so an upgrade makes a new one), the
// command line and the user it ran as.

// dataFromTemplate fills the directory dst (which must not exist) with a
// copy of the template that key names, if there is one; otherwise it
// calls make, which must create dst, and keeps a copy of it as the
// template. key lists the programs make runs and anything else its output
// depends on, such as its options and user (not dst: a data directory can
// be moved). Without a cache directory, it just calls make.
func dataFromTemplate(what string, key []string, dst string, make func() error) error {
	tmpl := templateDir(what, key)
	if tmpl != "" {
		if _, err := os.Stat(filepath.Join(tmpl, "data")); err == nil {
			if out, err := exec.Command("cp", "-a", filepath.Join(tmpl, "data"), dst).CombinedOutput(); err != nil {
				os.RemoveAll(dst)
				return fmt.Errorf("servers: copying the %s template %s: %v: %s", what, tmpl, err, out)
			}
			return nil
		}
	}
	if err := make(); err != nil {
		return err
	}
	if tmpl != "" {
		keepTemplate(tmpl, dst)
	}
	return nil
}

// templateDir returns the directory of the template of what that key
// names, or "" if there is no cache directory.
func templateDir(what string, key []string) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	h := sha256.New()
	for _, k := range key {
		fmt.Fprintf(h, "%q\n", k)
		if fi, err := os.Stat(k); err == nil && filepath.IsAbs(k) {
			fmt.Fprintf(h, "%d %d\n", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return filepath.Join(cache, "dlock-testenv", what+"-"+hex.EncodeToString(h.Sum(nil)[:8]))
}

// keepTemplate copies the data directory src to the template directory
// tmpl, unless another process got there first. A copy that fails leaves
// no template.
func keepTemplate(tmpl, src string) {
	if err := os.MkdirAll(filepath.Dir(tmpl), 0o755); err != nil {
		return
	}
	tmp, err := os.MkdirTemp(filepath.Dir(tmpl), filepath.Base(tmpl)+".tmp-")
	if err != nil {
		return
	}
	defer os.RemoveAll(tmp) // gone once renamed
	if err := exec.Command("cp", "-a", src, filepath.Join(tmp, "data")).Run(); err != nil {
		return
	}
	os.Rename(tmp, tmpl) // fails if another process kept one first: it is the same
}
