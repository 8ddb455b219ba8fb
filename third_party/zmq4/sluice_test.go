// Tests of the fork's changes (SLUICE.md); Sluice's tests of the whole
// transport are in its kvevents package.

package zmq4

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// subPeer is a raw NULL-mechanism SUB peer's greeting and READY.
func subPeer() []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10] = 0xff, 0x7f, 3
	copy(g[12:], "NULL")
	md, _ := Metadata{sysSockType: string(Sub)}.MarshalZMTP()
	body := append([]byte("\x05READY"), md...)
	return append(append(g, 0x4, byte(len(body))), body...)
}

func listenPub(t *testing.T, opts ...Option) (Socket, string) {
	t.Helper()
	pub := NewPub(context.Background(), opts...)
	t.Cleanup(func() { _ = pub.Close() })
	if err := pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return pub, pub.Addr().String()
}

// closedWithin reports whether the peer hangs up on c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

func TestPropertyTruncated(t *testing.T) {
	md, err := Metadata{sysSockType: "SUB", sysSockID: "abc"}.MarshalZMTP()
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(md) {
		var got Metadata = make(Metadata)
		if err := got.UnmarshalZMTP(md[:n]); err == nil && n != 0 && n != 1+len(sysSockType)+4+3 && n != 1+len(sysSockID)+4+3 {
			t.Errorf("%d of %d bytes: no error, read %v", n, len(md), got)
		}
	}
	for _, b := range [][]byte{{0}, {3, 'a', 'b', 'c', 0, 0, 0}, {1, 'a', 0xff, 0xff, 0xff, 0xff}, {0xff}} {
		var p Property
		if _, err := p.Write(b); err == nil {
			t.Errorf("%q: no error", b)
		}
	}
}

func TestHandshakeTimeout(t *testing.T) {
	_, addr := listenPub(t, WithHandshakeTimeout(100*time.Millisecond))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closedWithin(c, 5*time.Second) {
		t.Fatal("a silent peer was kept past the handshake timeout")
	}
}

func TestMaxConns(t *testing.T) {
	_, addr := listenPub(t, WithMaxConns(2))
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(subPeer()); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if !closedWithin(extra, 5*time.Second) {
		t.Fatal("a third connection was held with WithMaxConns(2)")
	}
	_ = held[0].Close()
	// Its slot comes back once the socket has seen it go.
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(subPeer()); err != nil {
			t.Fatal(err)
		}
		kept := !closedWithin(c, 100*time.Millisecond)
		_ = c.Close()
		if kept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection's slot never came back")
		}
	}
}

// TestWriteTimeout: a subscriber that stops reading is dropped once a write
// to it misses the deadline, and its topics go with it.
func TestWriteTimeout(t *testing.T) {
	pub, addr := listenPub(t, WithWriteTimeout(100*time.Millisecond))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := c.Write(append(subPeer(), 0, 3, 1, 'k', 'v')); err != nil {
		t.Fatal(err)
	}
	topics := pub.(Topics)
	for len(topics.Topics()) == 0 {
		time.Sleep(time.Millisecond)
	}
	big := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); len(topics.Topics()) != 0; {
		if time.Now().After(deadline) {
			t.Fatal("the stalled subscriber was never dropped")
		}
		if err := pub.Send(NewMsgFrom([]byte("kv"), big)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
