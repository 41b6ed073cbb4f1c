package load

// A Redis client of the four commands the anchor sends, written here
// rather than taken from a library: RESP for SET and GET is a few dozen
// lines, and the anchor is a benchmark's yardstick, not a product, so it
// should not add a dependency to idem's module.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// maxBulk bounds a bulk reply the client accepts.
const maxBulk = 16 << 20

// errNil is Redis's null reply (a GET of a missing key, a SET NX that did
// not set).
var errNil = errors.New("redis: nil")

// redisConn is one connection to Redis. Not safe for concurrent use: the
// anchor keeps a pool of them.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dialRedis(addr string, timeout time.Duration) (*redisConn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("redis: dial %s: %w", addr, err)
	}
	return &redisConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// do sends one command and reads its reply: a simple string or a bulk
// string as bytes, an integer as its decimal digits, errNil for a null,
// and a Redis error reply as an error.
func (rc *redisConn) do(args ...[]byte) ([]byte, error) {
	fmt.Fprintf(rc.w, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(rc.w, "$%d\r\n", len(a))
		rc.w.Write(a)
		rc.w.WriteString("\r\n")
	}
	if err := rc.w.Flush(); err != nil {
		return nil, fmt.Errorf("redis: write: %w", err)
	}
	return readReply(rc.r)
}

func (rc *redisConn) close() error { return rc.c.Close() }

// readReply reads one RESP2 reply that is not an array.
func readReply(r *bufio.Reader) ([]byte, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) == 0 {
		return nil, errors.New("redis: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return nil, redisReplyError{string(line[1:])}
	case '$':
		n, err := strconv.Atoi(string(line[1:]))
		switch {
		case err != nil || n < -1:
			return nil, fmt.Errorf("redis: bad bulk length %q", line[1:])
		case n == -1:
			return nil, errNil
		case n > maxBulk:
			return nil, fmt.Errorf("redis: bulk reply of %d bytes, more than %d", n, maxBulk)
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("redis: read bulk: %w", err)
		}
		if !bytes.HasSuffix(b, []byte("\r\n")) {
			return nil, errors.New("redis: bulk reply not ended by CRLF")
		}
		return b[:n], nil
	}
	return nil, fmt.Errorf("redis: unexpected reply type %q", line[0])
}

// readLine reads a line ended by CRLF, without it.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("redis: read: %w", err)
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errors.New("redis: reply line not ended by CRLF")
	}
	return bytes.Clone(line[:len(line)-2]), nil
}
