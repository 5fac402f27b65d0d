package chaos

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// A connection that lived through a blackhole does not carry on with a
// hole in its stream once the blackhole heals: the proxy dropped what it
// read meanwhile, which TCP would have retransmitted, so the heal resets
// it. (Carried on, such streams were read as garbage: etcd's HTTP/2
// connections failed every request with PROTOCOL_ERROR for seconds after
// each blackhole.) A new connection works.
func TestBlackholeHealLeavesNoHole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a line echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	p := testenv.StartProxy(t, ln.Addr().String())
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c, bufio.NewReader(c)
	}
	echo := func(c net.Conn, r *bufio.Reader, line string) (string, error) {
		if _, err := io.WriteString(c, line+"\n"); err != nil {
			return "", err
		}
		got, err := r.ReadString('\n')
		return strings.TrimSuffix(got, "\n"), err
	}
	c, r := dial()
	defer c.Close()
	if got, err := echo(c, r, "before"); err != nil || got != "before" {
		t.Fatalf("before the blackhole: %q, %v", got, err)
	}
	p.Blackhole(true)
	io.WriteString(c, "lost\n") // dropped by the proxy
	time.Sleep(100 * time.Millisecond)
	unblackhole(p)
	if got, err := echo(c, r, "after"); err == nil {
		t.Errorf("the connection carried on after the blackhole with a hole in it: sent \"lost\" and \"after\", got back %q", got)
	}
	c2, r2 := dial()
	defer c2.Close()
	if got, err := echo(c2, r2, "new"); err != nil || got != "new" {
		t.Errorf("a new connection after the heal: %q, %v", got, err)
	}
}
