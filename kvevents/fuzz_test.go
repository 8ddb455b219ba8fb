package kvevents

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// fuzzPublishers are the listeners FuzzListener writes to, one without
// credentials and one with, made once per process (a fuzz worker runs many
// inputs) and never closed.
var fuzzPublishers = sync.OnceValues(func() ([2]*Publisher, error) {
	var pubs [2]*Publisher
	for i, creds := range []*Credentials{nil, {User: "indexer", Password: "s3cret"}} {
		p, err := New(context.Background(), Config{Endpoint: "tcp://127.0.0.1:0", Credentials: creds,
			Pod: "sluice-0", Model: "smol", Medium: MediumCPU, BlockSize: testBS})
		if err != nil {
			return pubs, err
		}
		pubs[i] = p
	}
	return pubs, nil
})

// plainHello is a PLAIN client's greeting and HELLO with the fuzz
// publisher's credentials, then its INITIATE.
func plainHello(user, pass string) []byte {
	hello := append(append([]byte{byte(len(user))}, user...), byte(len(pass)))
	hello = append(hello, pass...)
	b := append(zmtpGreeting("PLAIN", false), zmtpCommand("HELLO", hello)...)
	return append(b, zmtpCommand("INITIATE", zmtpProperty("Socket-Type", "SUB"))...)
}

// FuzzListener writes arbitrary bytes (greeting, handshake, frames) to the
// KV-event publisher's listening socket, then ends the connection, and
// asserts that the process lives (a panic in any of the socket's
// goroutines fails the run) and that the publisher still greets a real
// peer: nothing a peer sends may end it or stop it serving others.
func FuzzListener(f *testing.F) {
	sub := append(subHandshake(), zmtpFrame(0, []byte("\x01kv@"))...)
	f.Add(false, sub)
	f.Add(false, lyingReady())
	f.Add(false, append(zmtpGreeting("NULL", false), zmtpCommand("READY", []byte{200, 'x'})...))
	f.Add(false, append(append(zmtpGreeting("NULL", false), 0x6), bytes.Repeat([]byte{0x40}, 8)...))
	f.Add(false, append(sub, zmtpFrame(0x1, nil)...))
	f.Add(false, append(sub, zmtpCommand("PING", []byte("\x00\x10ttl"))...))
	f.Add(false, append(sub, zmtpFrame(0, []byte("\x00kv@"))...))
	f.Add(false, zmtpGreeting("PLAIN", false))
	f.Add(true, plainHello("indexer", "s3cret"))
	f.Add(true, plainHello("indexer", "wrong"))
	f.Add(true, append(zmtpGreeting("PLAIN", false), zmtpCommand("HELLO", []byte{7, 'i'})...))
	f.Add(true, append(plainHello("indexer", "s3cret"), zmtpFrame(0, []byte("\x01"))...))
	f.Fuzz(func(t *testing.T, plain bool, data []byte) {
		pubs, err := fuzzPublishers()
		if err != nil {
			t.Fatal(err)
		}
		pub := pubs[0]
		if plain {
			pub = pubs[1]
		}
		addr := fmt.Sprintf("127.0.0.1:%d", addrPort(t, pub))
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The write may fail when the publisher has hung up already.
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write(data)
		// EOF after the input: the publisher reads to the end and hangs up.
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)

		// A real peer is still greeted.
		g, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		_ = g.SetDeadline(time.Now().Add(5 * time.Second))
		mech := "NULL"
		if plain {
			mech = "PLAIN"
		}
		if _, err := g.Write(zmtpGreeting(mech, false)); err != nil {
			t.Fatal(err)
		}
		greeting := make([]byte, 64)
		if _, err := io.ReadFull(g, greeting); err != nil || greeting[0] != 0xff || string(greeting[12:12+len(mech)]) != mech {
			t.Fatalf("the publisher no longer greets: %q %v", greeting, err)
		}
	})
}
