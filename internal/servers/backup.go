package servers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// backup takes a cold backup of the server's data directory, called data
// inside its directory: it stops the server, copies the data to a new
// directory inside the server's and starts it again. It returns the
// copy's directory, for restoreLocked.
func (d *daemon) backup(data string) (string, error) {
	var backup string
	err := d.restartWith("Backup", func() error {
		var err error
		backup, err = copyData(d.dir, data)
		return err
	})
	return backup, err
}

// restoreLocked kills the server (SIGKILL) and replaces its data
// directory, called data inside its directory, with the copy that backup
// made in the directory backup, leaving the server stopped. The copy is
// staged while the server still runs. d.mu must be held.
func (d *daemon) restoreLocked(data, backup string) error {
	staged, err := stageData(d.dir, data, backup)
	if err != nil {
		return err
	}
	if err := d.killLocked(); err != nil {
		return err
	}
	return swapData(d.dir, data, staged)
}

// copyData copies the data directory called data inside the server's
// directory dir to a new directory inside dir, keeping owners and modes,
// and returns the new directory.
func copyData(dir, data string) (string, error) {
	backup, err := os.MkdirTemp(dir, "backup-")
	if err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(dir, data), filepath.Join(backup, data)).CombinedOutput(); err != nil {
		return "", fmt.Errorf("servers: copying %s: %v: %s", filepath.Join(dir, data), err, out)
	}
	return backup, nil
}

// stageData copies the data directory in backup, which copyData made,
// beside the server's data directory called data inside dir, for
// swapData: the copy takes a while, and the server can run meanwhile.
func stageData(dir, data, backup string) (string, error) {
	staged := filepath.Join(dir, data+".restored")
	if err := os.RemoveAll(staged); err != nil {
		return "", fmt.Errorf("servers: %w", err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(backup, data), staged).CombinedOutput(); err != nil {
		return "", fmt.Errorf("servers: restoring %s: %v: %s", filepath.Join(backup, data), err, out)
	}
	return staged, nil
}

// swapData replaces the data directory called data inside dir, whose
// server is not running, with the one stageData staged.
func swapData(dir, data, staged string) error {
	if err := os.RemoveAll(filepath.Join(dir, data)); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	if err := os.Rename(staged, filepath.Join(dir, data)); err != nil {
		return fmt.Errorf("servers: %w", err)
	}
	return nil
}
