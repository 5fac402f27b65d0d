package chaos

import (
	"os"
	"testing"

	"github.com/dlock-go/dlock/internal/testenv"
)

// TestMain lets the test binary serve as the harness's client program: Run
// starts copies of it with ClientEnv set.
func TestMain(m *testing.M) {
	RunClientIfChild()
	code := m.Run()
	testenv.StopAll()
	os.Exit(code)
}
