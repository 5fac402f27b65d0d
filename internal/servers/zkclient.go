package servers

import (
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// fourLetter sends the ZooKeeper four-letter word cmd, such as "ruok" or
// "srvr", to addr on a new connection and returns the whole reply. The
// server closes the connection after answering.
func fourLetter(addr, cmd string, timeout time.Duration) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(conn, cmd); err != nil {
		return "", fmt.Errorf("servers: sending %q to %s: %w", cmd, addr, err)
	}
	b, err := io.ReadAll(io.LimitReader(conn, 1<<20))
	if err != nil {
		return string(b), fmt.Errorf("servers: reading %q reply from %s: %w", cmd, addr, err)
	}
	return string(b), nil
}

// srvrMode returns the value of the "Mode:" line in the reply to srvr, or
// "" if the server is not serving requests.
func srvrMode(reply string) string {
	for line := range strings.Lines(reply) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Mode:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// confValue returns the value of key in the reply to conf.
func confValue(reply, key string) string {
	for line := range strings.Lines(reply) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && k == key {
			return v
		}
	}
	return ""
}
