package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/sluicehq/sluice/kvcache"
)

// The ZMTP 3.0 wire (rfc.zeromq.org/spec/23), written by hand so that a test
// can say exactly what a hostile peer sends.

// zmtpGreeting is the 64-byte greeting: signature, version 3.0, mechanism.
func zmtpGreeting(mechanism string, asServer bool) []byte {
	g := make([]byte, 64)
	g[0], g[9], g[10], g[11] = 0xff, 0x7f, 3, 0
	copy(g[12:32], mechanism)
	if asServer {
		g[32] = 1
	}
	return g
}

// zmtpFrame is one frame: flags (more 0x1, command 0x4; long 0x2 is set
// here by size), then the size in 1 or 8 bytes, then the body.
func zmtpFrame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		out := append([]byte{flags | 0x2}, binary.BigEndian.AppendUint64(nil, uint64(len(body)))...)
		return append(out, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// zmtpCommand is a command frame: name length, name, body.
func zmtpCommand(name string, body []byte) []byte {
	return zmtpFrame(0x4, append(append([]byte{byte(len(name))}, name...), body...))
}

// zmtpProperty is one metadata property: name length, name, 4-byte value length, value.
func zmtpProperty(name, value string) []byte {
	p := append([]byte{byte(len(name))}, name...)
	p = binary.BigEndian.AppendUint32(p, uint32(len(value)))
	return append(p, value...)
}

// lyingReady is the report's crash: a well-formed NULL greeting and a READY
// whose one property ends two bytes into its 4-byte value length.
// go-zeromq v0.17.0 sliced past the end in (*Property).Write, in its accept
// goroutine, and the panic ended the process.
func lyingReady() []byte {
	prop := zmtpProperty("Socket-Type", "SUB")
	return append(zmtpGreeting("NULL", false), zmtpCommand("READY", prop[:1+len("Socket-Type")+2])...)
}

// subHandshake is a NULL-mechanism SUB peer's greeting and READY.
func subHandshake() []byte {
	return append(zmtpGreeting("NULL", false), zmtpCommand("READY", zmtpProperty("Socket-Type", "SUB"))...)
}

// readFrame reads one frame's flags and body from a ZMTP stream.
func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [9]byte
	if _, err := io.ReadFull(r, hdr[:2]); err != nil {
		return 0, nil, err
	}
	size := uint64(hdr[1])
	if hdr[0]&0x2 != 0 {
		if _, err := io.ReadFull(r, hdr[2:]); err != nil {
			return 0, nil, err
		}
		size = binary.BigEndian.Uint64(hdr[1:])
	}
	if size > 1<<20 {
		return 0, nil, fmt.Errorf("frame of %d bytes", size)
	}
	body := make([]byte, size)
	_, err := io.ReadFull(r, body)
	return hdr[0], body, err
}

func newLoopbackPublisher(t *testing.T, cfg Config) *Publisher {
	t.Helper()
	cfg.Endpoint = cmp(cfg.Endpoint, "tcp://127.0.0.1:0")
	cfg.Pod, cfg.Model, cfg.Medium, cfg.BlockSize = "sluice-0", "smol", MediumCPU, testBS
	pub, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close(t.Context()) })
	return pub
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestHostilePeers: what unauthenticated peers send to the KV-event port,
// each of which either ended the process or stopped every later subscriber
// from being greeted, before the publisher ran on the fork in
// third_party/zmq4. After all of them, the publisher still accepts: a real
// subscriber is greeted and receives a batch within a second, while two
// silent connections are still open.
func TestHostilePeers(t *testing.T) {
	pub := newLoopbackPublisher(t, Config{})
	addr := fmt.Sprintf("127.0.0.1:%d", addrPort(t, pub))

	long := append(zmtpGreeting("NULL", false), 0x6) // a long command frame of 2^62 bytes
	long = binary.BigEndian.AppendUint64(long, 1<<62)
	for _, tc := range []struct {
		name  string
		bytes []byte
	}{
		{"READY property past its end", lyingReady()},
		{"READY property name past its end", append(zmtpGreeting("NULL", false), zmtpCommand("READY", []byte{200, 'x'})...)},
		{"frame of 2^62 bytes", long},
		{"frame of 2^62 bytes after the handshake", append(subHandshake(), append([]byte{0x2}, binary.BigEndian.AppendUint64(nil, 1<<62)...)...)},
		{"bad signature", bytes.Repeat([]byte{0xff}, 64)},
		{"unknown mechanism", zmtpGreeting("CURVE", false)},
		{"a PUB peer", append(zmtpGreeting("NULL", false), zmtpCommand("READY", zmtpProperty("Socket-Type", "PUB"))...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			// The publisher answers with its greeting (and READY) and hangs up.
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, net.ErrClosed) && !isReset(err) {
				t.Fatalf("the publisher kept the connection: %v", err)
			}
		})
	}

	// Silent peers: one says nothing, one half a greeting. Either held
	// go-zeromq's only accept goroutine, which greeted inline and without a
	// deadline.
	for _, say := range [][]byte{nil, zmtpGreeting("NULL", false)[:20]} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := c.Write(say); err != nil {
			t.Fatal(err)
		}
	}

	start := time.Now()
	msgs := subscribeWithin(t, pub, "kv@", time.Second)
	pub.BlockStored(kvcache.Group{Groups: 1}, 1, 0, make([]int32, testBS))
	select {
	case m := <-msgs:
		if len(m.Frames) != 3 || string(m.Frames[0]) != pub.Topic() {
			t.Fatalf("got %v", m)
		}
	case <-time.After(time.Second - time.Since(start)):
		t.Fatal("no batch within a second")
	}
	t.Logf("greeted and served in %v", time.Since(start))
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout() && !errors.Is(err, os.ErrDeadlineExceeded)
}

// subscribeWithin is subscribe with a deadline on the whole of it: dial,
// handshake and the publisher seeing the subscription to topic.
func subscribeWithin(t *testing.T, p *Publisher, topic string, within time.Duration, opts ...zmq4.Option) <-chan zmq4.Msg {
	t.Helper()
	deadline := time.Now().Add(within)
	sub := zmq4.NewSub(t.Context(), opts...)
	t.Cleanup(func() { _ = sub.Close() })
	dialed := make(chan error, 1)
	go func() { dialed <- sub.Dial(fmt.Sprintf("tcp://127.0.0.1:%d", addrPort(t, p))) }()
	select {
	case err := <-dialed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Until(deadline)):
		t.Fatalf("not greeted within %v", within)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, topic); err != nil {
		t.Fatal(err)
	}
	for !slices.Contains(p.sock.(zmq4.Topics).Topics(), topic) {
		if time.Now().After(deadline) {
			t.Fatalf("subscription not seen within %v", within)
		}
		time.Sleep(time.Millisecond) // ZeroMQ gives no signal for it
	}
	msgs := make(chan zmq4.Msg, 1<<14)
	go func() {
		defer close(msgs)
		for {
			m, err := sub.Recv()
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	return msgs
}

// TestSlowSubscriber: a subscriber that stops reading must not stall the
// publisher or the others. go-zeromq wrote each batch to every subscriber in
// turn, without a deadline, so once a stalled peer's socket buffers were
// full every other subscriber waited for it forever.
func TestSlowSubscriber(t *testing.T) {
	pub := newLoopbackPublisher(t, Config{MaxBatch: 1})

	slow, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", addrPort(t, pub)))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_ = slow.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := slow.Write(subHandshake()); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(slow, make([]byte, 64)); err != nil { // the publisher's greeting
		t.Fatal(err)
	}
	if _, ready, err := readFrame(slow); err != nil || !bytes.HasPrefix(ready, []byte("\x05READY")) {
		t.Fatalf("READY: %q %v", ready, err)
	}
	if _, err := slow.Write(zmtpFrame(0, []byte("\x01kv"))); err != nil { // subscribe, then never read again
		t.Fatal(err)
	}
	for !slices.Contains(pub.sock.(zmq4.Topics).Topics(), "kv") {
		time.Sleep(time.Millisecond)
	}
	msgs := subscribeWithin(t, pub, "kv@", 5*time.Second)

	// 40 MB in 500 batches: far past what the stalled peer's socket buffers
	// hold, so a publisher that waits for it stops.
	tokens := make([]int32, 16<<10)
	for i := range tokens {
		tokens[i] = 1 << 20 // 5 bytes of msgpack each
	}
	const batches = 500
	for i := range batches {
		pub.BlockStored(kvcache.Group{Groups: 1}, uint64(i+1), uint64(i), tokens)
	}
	last := uint64(batches) // the first batch is the publisher's AllBlocksCleared
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m := <-msgs:
			if seq := binary.BigEndian.Uint64(m.Frames[1]); seq == last {
				return
			}
		case <-timeout:
			t.Fatalf("the last batch never reached the reading subscriber (%d of %d batches handed to the socket)", pub.Batches(), last+1)
		}
	}
}
