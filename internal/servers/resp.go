package servers

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// redisError is an error reply sent by the server, such as
// "MOVED 866 127.0.0.1:7001" or "WRONGTYPE ...". Its text is exactly the
// server's.
type redisError string

func (e redisError) Error() string { return string(e) }

// maxBulk bounds the length of a bulk string or array the decoder accepts.
const maxBulk = 512 << 20

// writeCommand encodes args as a RESP array of bulk strings.
func writeCommand(w *bufio.Writer, args []string) error {
	w.WriteString("*")
	w.WriteString(strconv.Itoa(len(args)))
	w.WriteString("\r\n")
	for _, a := range args {
		w.WriteString("$")
		w.WriteString(strconv.Itoa(len(a)))
		w.WriteString("\r\n")
		w.WriteString(a)
		w.WriteString("\r\n")
	}
	return w.Flush()
}

// readReply decodes one RESP2 reply. It returns a string for simple and
// bulk strings, an int64 for integers, a []any for arrays, nil for null
// bulk strings and arrays, and a redisError for error replies.
func readReply(r *bufio.Reader) (any, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errors.New("servers: RESP: empty line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return redisError(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("servers: RESP: bad integer %q", body)
		}
		return n, nil
	case '$':
		n, err := parseLen(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return nil, errors.New("servers: RESP: bulk string not terminated by CRLF")
		}
		return string(buf[:n]), nil
	case '*':
		n, err := parseLen(body)
		if err != nil || n < 0 {
			return nil, err
		}
		elems := make([]any, 0, min(n, 1024))
		for range n {
			v, err := readReply(r)
			if err != nil {
				return nil, err
			}
			elems = append(elems, v)
		}
		return elems, nil
	default:
		return nil, fmt.Errorf("servers: RESP: unexpected reply type %q", line[0])
	}
}

// readLine reads a CRLF-terminated line and returns it without the CRLF.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		if err == io.EOF && line != "" {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return "", errors.New("servers: RESP: line not terminated by CRLF")
	}
	return line[:len(line)-2], nil
}

// parseLen parses the length of a bulk string or array. A length of -1
// means null and is returned as -1 with a nil error.
func parseLen(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 || n > maxBulk {
		return 0, fmt.Errorf("servers: RESP: bad length %q", s)
	}
	return n, nil
}

// flatten renders a decoded reply the way Do returns it.
func flatten(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case redisError:
		return string(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = flatten(e)
		}
		return strings.Join(parts, "\n")
	default:
		return fmt.Sprint(v)
	}
}

// roundTrip dials addr, authenticates with password if it is not empty,
// sends one command and returns its decoded reply. The whole exchange
// must finish within timeout.
func roundTrip(addr, password string, timeout time.Duration, args []string) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("servers: Do: no command")
	}
	deadline := time.Now().Add(timeout)
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("servers: redis %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, fmt.Errorf("servers: redis %s: %w", addr, err)
	}
	w := bufio.NewWriter(conn)
	r := bufio.NewReader(conn)
	if password != "" {
		if err := writeCommand(w, []string{"AUTH", password}); err != nil {
			return nil, fmt.Errorf("servers: redis %s: %w", addr, err)
		}
	}
	if err := writeCommand(w, args); err != nil {
		return nil, fmt.Errorf("servers: redis %s: %w", addr, err)
	}
	if password != "" {
		v, err := readReply(r)
		if err != nil {
			return nil, fmt.Errorf("servers: redis %s: AUTH: %w", addr, err)
		}
		if e, ok := v.(redisError); ok {
			return nil, e
		}
	}
	v, err := readReply(r)
	if err != nil {
		return nil, fmt.Errorf("servers: redis %s: %s: %w", addr, args[0], err)
	}
	return v, nil
}
