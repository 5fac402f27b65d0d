package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// COMMAND, run by the same user as dlock, cannot read dlock's secrets
// from /proc (issue 33): its own environment is clean, and dlock's, which
// still holds DLOCK_REDIS and DLOCK_REDIS_PASSWORD as it was started, is
// closed to it since dlock is not dumpable. COMMAND reads what an
// attacker would: the environment of its parent (the supervisor) and the
// environment and command line of dlock, the supervisor's parent.
//
// Root reads any process's /proc files, so a test run as root runs dlock
// as nobody.
func TestIntegrationCommandCannotReadSecrets(t *testing.T) {
	t.Parallel()
	const secret = "S3cretPW-environ"
	srv := testenv.StartRedis(t, testenv.RedisConfig{Args: []string{"--requirepass", secret}})
	bin := binary(t)
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil { // for nobody
		t.Fatal(err)
	}
	script := `gp=$(cut -d' ' -f4 /proc/$PPID/stat)
echo "supervisor $PPID, dlock $gp"
for f in /proc/$PPID/environ /proc/$gp/environ /proc/$gp/cmdline; do
	if tr '\0' '\n' < "$f"; then echo "read $f"; fi
done`
	for _, c := range []struct {
		name string
		env  []string
		args []string
	}{
		{"run", []string{"DLOCK_REDIS=redis://:" + secret + "@" + srv.Addr()}, []string{"run", lockName(t), "--", "sh", "-c", script}},
		{"elect", []string{"DLOCK_REDIS=redis://" + srv.Addr(), "DLOCK_REDIS_PASSWORD=" + secret}, []string{"elect", lockName(t), "--", "sh", "-c", script}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/"}, c.env...)
			cmd.Dir = "/"
			if os.Geteuid() == 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("dlock %s: %v; stdout %q, stderr %q", c.name, err, stdout.String(), stderr.String())
				}
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				t.Fatalf("dlock %s still running after a minute; stderr %q", c.name, stderr.String())
			}
			t.Logf("COMMAND saw:\n%s", strings.ReplaceAll(stdout.String(), secret, "<SECRET>"))
			if !strings.Contains(stdout.String(), "supervisor ") {
				t.Fatalf("COMMAND did not run: stdout %q, stderr %q", stdout.String(), stderr.String())
			}
			if strings.Contains(stdout.String(), secret) {
				t.Errorf("COMMAND read the password from /proc")
			}
		})
	}
}
