package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/plain"

	"github.com/sluicehq/sluice/kvcache"
)

func replayAddr(t *testing.T, p *Publisher) string {
	t.Helper()
	a, ok := p.ReplayAddr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("replay socket bound to %v", p.ReplayAddr())
	}
	return fmt.Sprintf("127.0.0.1:%d", a.Port)
}

func seqBytes(s uint64) []byte { return binary.BigEndian.AppendUint64(nil, s) }

// replayFrom is llm-d-router's replay client (pkg/kvevents/zmq_subscriber.go
// requestReplay): a DEALER sends ["", start] and reads replies until the
// end marker, dropping a leading empty frame and taking three frames whose
// last is empty for the end. It returns the batches as [topic, seq,
// payload] frames, checking each frame as llm-d does.
func replayFrom(t *testing.T, addr string, start []byte, opts ...zmq4.Option) [][][]byte {
	t.Helper()
	out, err := replayErr(t.Context(), addr, start, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func replayErr(ctx context.Context, addr string, start []byte, opts ...zmq4.Option) ([][][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dealer := zmq4.NewDealer(ctx, opts...)
	defer dealer.Close()
	if err := dealer.Dial("tcp://" + addr); err != nil {
		return nil, err
	}
	if err := dealer.SendMulti(zmq4.NewMsgFrom([]byte{}, start)); err != nil {
		return nil, err
	}
	var out [][][]byte
	for {
		msg, err := dealer.Recv()
		if err != nil {
			return out, fmt.Errorf("after %d batches: %w", len(out), err)
		}
		frames := msg.Frames
		if len(frames) > 0 && len(frames[0]) == 0 {
			frames = frames[1:]
		}
		if len(frames) == 3 && len(frames[2]) == 0 {
			if len(frames[0]) != 0 || !bytes.Equal(frames[1], endSeq) {
				return out, fmt.Errorf("end marker %q, want vLLM's [\"\", -1, \"\"]", frames)
			}
			return out, nil
		}
		if len(frames) != 3 || len(frames[1]) != 8 {
			return out, fmt.Errorf("reply %q: want [topic, seq, payload]", frames)
		}
		out = append(out, frames)
	}
}

// sendBatches has pub send n batches of one event each, waiting for each to
// be handed to the socket so that none share a batch.
func sendBatches(t *testing.T, pub *Publisher, n int, first uint64) {
	t.Helper()
	for i := range n {
		waitSent(pub)
		pub.BlockStored(kvcache.Group{Groups: 1}, first+uint64(i), 0, make([]int32, testBS))
	}
	waitSent(pub)
}

// waitSent waits until pub's sender has handed every event to the socket
// (the first, AllBlocksCleared, included).
func waitSent(pub *Publisher) {
	for pub.pending.Load() != 0 {
		time.Sleep(100 * time.Microsecond) // the sender gives no signal
	}
}

// TestReplayWindow: the replay socket resends, in vLLM's framing, exactly
// the batches the subscribers got live, from the requested sequence on,
// within the last BufferSteps; a start past the newest gets the end marker
// alone; and the bytes bound evicts too.
func TestReplayWindow(t *testing.T) {
	// One event a batch: the blocks held would take more than half the
	// buffer, so the sender keeps a window instead of resetting (reset.go).
	pub := newLoopbackPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0", BufferSteps: 5, MaxBatch: 1})
	msgs := subscribe(t, pub)
	// Batches 0 (AllBlocksCleared, usually sent before the subscription
	// arrives: ZeroMQ's slow joiner; on a busy machine the subscription can
	// win, and batch 0 arrives too) to 7.
	sendBatches(t, pub, 7, 1)
	live := map[uint64][]byte{}
	for live[7] == nil {
		m := <-msgs
		live[binary.BigEndian.Uint64(m.Frames[1])] = m.Frames[2]
	}
	addr := replayAddr(t, pub)
	for _, c := range []struct {
		start []byte
		want  []uint64
	}{
		{seqBytes(0), []uint64{3, 4, 5, 6, 7}}, // 0..2 left the buffer
		{seqBytes(5), []uint64{5, 6, 7}},
		{seqBytes(7), []uint64{7}},
		{seqBytes(8), nil},
		{seqBytes(1 << 63), nil},
		{[]byte{6}, []uint64{6, 7}},         // vLLM reads any length
		{[]byte{}, []uint64{3, 4, 5, 6, 7}}, // int.from_bytes(b"") is 0
		{append([]byte{0}, seqBytes(4)...), []uint64{4, 5, 6, 7}},
		{append([]byte{1}, seqBytes(4)...), nil}, // past every sequence
	} {
		got := replayFrom(t, addr, c.start)
		var seqs []uint64
		for _, f := range got {
			s := binary.BigEndian.Uint64(f[1])
			seqs = append(seqs, s)
			if string(f[0]) != pub.Topic() || !bytes.Equal(f[2], live[s]) {
				t.Errorf("start %x: batch %d is not the one sent live under %s", c.start, s, pub.Topic())
			}
		}
		if fmt.Sprint(seqs) != fmt.Sprint(c.want) {
			t.Errorf("start %x: replayed %v, want %v", c.start, seqs, c.want)
		}
	}

	// A bytes bound of two batches' payloads keeps the last two.
	small := newLoopbackPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0", BufferBytes: 2 * len(live[7])})
	sendBatches(t, small, 4, 1)
	if got := replayFrom(t, replayAddr(t, small), seqBytes(0)); len(got) != 2 || binary.BigEndian.Uint64(got[0][1]) != 3 {
		t.Errorf("bytes bound: replayed %d batches, want 3 and 4", len(got))
	}
}

// TestReplayRebuildsIndex is a picker restart: an indexer that was never
// subscribed asks for everything from 0 and rebuilds, from the replay
// alone, exactly the index of a pool that stored, shared and evicted.
func TestReplayRebuildsIndex(t *testing.T) {
	pub := newLoopbackPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0", MaxBatch: 5})
	pool, err := kvcache.NewPool(kvcache.Config{Blocks: 20, BlockSize: testBS, PrefixCaching: true, Events: pub})
	if err != nil {
		t.Fatal(err)
	}
	var pre kvcache.Prefix
	for range 3 {
		for _, p := range familyPrompts(3, 4) {
			var tb kvcache.Table
			pool.Lookup(&pre, p, len(p)-1)
			if !pool.Allocate(&tb, &pre, len(p), 0) {
				t.Fatal("allocate failed")
			}
			pool.Commit(&tb, p, len(p))
			pool.Free(&tb)
		}
	}
	for pub.pending.Load() != 0 {
		time.Sleep(time.Millisecond) // the sender gives no signal
	}
	r := newReplay(MediumCPU)
	for _, f := range replayFrom(t, replayAddr(t, pub), seqBytes(0)) {
		d, err := decodeMessage(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.apply(d); err != nil {
			t.Fatal(err)
		}
	}
	if indexed := indexedBlocks(pool); !maps.Equal(indexed, r.live) || r.nextSeq != pub.Batches() || r.removed == 0 {
		t.Errorf("replayed %d of %d batches, %d removals: %d blocks live, the pool indexes %d",
			r.nextSeq, pub.Batches(), r.removed, len(r.live), len(indexed))
	}
}

// TestReplayAfterReset is a picker restart on a replica that has sent
// many times its replay buffer: the sequence started over with the pool's
// whole state each time the buffer filled, so a replay from 0 still
// rebuilds exactly the pool's index; and a subscriber that stayed on the
// live stream all along, taking AllBlocksCleared and the sequence going
// back to 0 as llm-d's indexer does, holds it too.
func TestReplayAfterReset(t *testing.T) {
	pub := newLoopbackPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0", MaxBatch: 3, BufferSteps: 40})
	msgs := subscribe(t, pub)
	pool, err := kvcache.NewPool(kvcache.Config{Blocks: 20, BlockSize: testBS, PrefixCaching: true, Events: pub})
	if err != nil {
		t.Fatal(err)
	}
	var pre kvcache.Prefix
	for round := range 12 {
		for _, p := range familyPrompts(3, 4) {
			p = append(p, int32(round)) // a new last block every round
			var tb kvcache.Table
			pool.Lookup(&pre, p, len(p)-1)
			if !pool.Allocate(&tb, &pre, len(p), 0) {
				t.Fatal("allocate failed")
			}
			pool.Commit(&tb, p, len(p))
			pool.Free(&tb)
			waitSent(pub) // small batches: many of them
		}
	}
	waitSent(pub)
	if pub.Resets() == 0 {
		t.Fatalf("%d batches through a buffer of 40 and no sequence reset", pub.Batches())
	}
	want := indexedBlocks(pool)

	r := newReplay(MediumCPU)
	got := replayFrom(t, replayAddr(t, pub), seqBytes(0))
	if len(got) == 0 || binary.BigEndian.Uint64(got[0][1]) != 0 {
		first := "nothing"
		if len(got) > 0 {
			first = fmt.Sprint(binary.BigEndian.Uint64(got[0][1]))
		}
		t.Fatalf("a replay from 0 starts at %s, not 0: llm-d's indexer refuses it", first)
	}
	for _, f := range got {
		d, err := decodeMessage(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.apply(d); err != nil {
			t.Fatal(err)
		}
	}
	if !maps.Equal(r.live, want) {
		t.Errorf("replay after %d resets: %d blocks live, the pool indexes %d", pub.Resets(), len(r.live), len(want))
	}

	live := newReplay(MediumCPU)
	for live.nextSeq == 0 || !maps.Equal(live.live, want) {
		var m zmq4.Msg
		select {
		case m = <-msgs:
		case <-time.After(5 * time.Second):
			t.Fatalf("live stream: %d blocks live after batch %d, the pool indexes %d", len(live.live), live.nextSeq-1, len(want))
		}
		d, err := decodeMessage(m.Frames)
		if err != nil {
			t.Fatal(err)
		}
		if d.seq == 0 {
			live.first = true // llm-d: "Detected event sequence reset"
		}
		if err := live.apply(d); err != nil {
			t.Fatal(err)
		}
	}
}

// dealerHandshake is a NULL-mechanism DEALER peer's greeting and READY,
// with a routing id when id is not empty.
func dealerHandshake(id string) []byte {
	props := zmtpProperty("Socket-Type", "DEALER")
	if id != "" {
		props = append(props, zmtpProperty("Identity", id)...)
	}
	return append(zmtpGreeting("NULL", false), zmtpCommand("READY", props)...)
}

// rawPeer connects to addr and completes a DEALER handshake by hand.
func rawPeer(t *testing.T, addr, id string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(dealerHandshake(id)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if _, ready, err := readFrame(c); err != nil || !bytes.HasPrefix(ready, []byte("\x05READY")) {
		t.Fatalf("READY: %q %v", ready, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c
}

// TestReplayHostileRequests: requests of every wrong shape are ignored (no
// reply, as vLLM), a message over the size limit costs its sender the
// connection, and none of it stops the socket: after each, a real client's
// replay is whole. A peer that asks for a replay and never reads holds up
// no one, and a second connection claiming a routing id in use is refused,
// so it cannot read the first one's replies.
func TestReplayHostileRequests(t *testing.T) {
	pub := newLoopbackPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0"})
	// Enough to fill a stalled peer's socket buffers many times over.
	tokens := make([]int32, 16<<10)
	for i := range tokens {
		tokens[i] = 1 << 20
	}
	for i := range 60 {
		waitSent(pub)
		pub.BlockStored(kvcache.Group{Groups: 1}, uint64(i+1), 0, tokens)
	}
	waitSent(pub)
	addr := replayAddr(t, pub)
	whole := func(what string) {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			got, err := replayErr(t.Context(), addr, seqBytes(0))
			if err == nil && len(got) != 61 {
				err = fmt.Errorf("replayed %d of 61 batches", len(got))
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("after %s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after %s: no replay within 10 s", what)
		}
	}

	for _, c := range []struct {
		name string
		msg  []byte
	}{
		{"one frame", zmtpFrame(0, seqBytes(0))},
		{"five frames", append(bytes.Repeat(zmtpFrame(1, seqBytes(0)), 3), zmtpFrame(0, seqBytes(0))...)},
		{"four frames", append(append(zmtpFrame(1, nil), zmtpFrame(1, seqBytes(0))...), zmtpFrame(0, nil)...)},
		{"a command", zmtpCommand("PING", []byte("\x00\x10"))},
		{"an unknown command", zmtpCommand("JUNK", bytes.Repeat([]byte{7}, 300))},
	} {
		peer := rawPeer(t, addr, "")
		if _, err := peer.Write(c.msg); err != nil {
			t.Fatal(err)
		}
		_ = peer.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, body, err := readFrame(peer); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: answered %q %v, want silence", c.name, body, err)
		}
		whole(c.name)
	}

	// Over the 64 KiB inbound limit: the connection goes.
	big := rawPeer(t, addr, "")
	_, _ = big.Write(append(zmtpFrame(1, nil), zmtpFrame(0, make([]byte, 70<<10))...))
	if !closedWithin(big, 5*time.Second) {
		t.Error("a 70 KiB request did not cost its sender the connection")
	}
	whole("an oversized request")

	// A peer that asks and never reads: its replay (60 MB) cannot fit its
	// socket buffers, yet others are served meanwhile.
	stalled := rawPeer(t, addr, "stalled")
	_ = stalled.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := stalled.Write(append(zmtpFrame(1, nil), zmtpFrame(0, seqBytes(0))...)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	whole("a stalled reader")

	// The same routing id again: refused, and the first keeps its replies.
	thief, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Close()
	_ = thief.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = thief.Write(dealerHandshake("stalled"))
	if !closedWithin(thief, 5*time.Second) {
		t.Error("a second connection with a routing id in use was kept")
	}
}

// closedWithin reports whether the peer hangs up on c within d, reading
// (and discarding) what it sends until then.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// fuzzReplayPublisher is FuzzReplayListener's publisher, made once per
// process and never closed, holding the AllBlocksCleared batch and three
// more.
var fuzzReplayPublisher = sync.OnceValues(func() (*Publisher, error) {
	p, err := New(context.Background(), Config{Endpoint: "tcp://127.0.0.1:0", ReplayEndpoint: "tcp://127.0.0.1:0",
		Pod: "sluice-0", Model: "smol", Medium: MediumCPU, BlockSize: testBS})
	if err != nil {
		return nil, err
	}
	for i := range 3 {
		waitSent(p)
		p.BlockStored(kvcache.Group{Groups: 1}, uint64(i+1), 0, make([]int32, testBS))
	}
	waitSent(p)
	return p, nil
})

// FuzzReplayListener writes arbitrary bytes (greeting, handshake, requests)
// to the replay socket, then ends the connection, and asserts that the
// process lives and that a real client's replay is still whole.
func FuzzReplayListener(f *testing.F) {
	req := append(zmtpFrame(1, nil), zmtpFrame(0, seqBytes(0))...)
	f.Add(append(dealerHandshake(""), req...))
	f.Add(append(dealerHandshake("peer"), bytes.Repeat(req, 3)...))
	f.Add(append(dealerHandshake(""), zmtpFrame(0, seqBytes(2))...))
	f.Add(append(dealerHandshake(""), append(zmtpFrame(1, nil), zmtpFrame(0, make([]byte, 9))...)...))
	f.Add(append(dealerHandshake(""), zmtpCommand("PING", []byte("\x00\x10ttl"))...))
	f.Add(append(dealerHandshake(""), append(zmtpFrame(0x2|0x1, nil)[:1], bytes.Repeat([]byte{0x40}, 8)...)...))
	f.Add(append(zmtpGreeting("NULL", false), zmtpCommand("READY", zmtpProperty("Socket-Type", "SUB"))...))
	f.Add(append(zmtpGreeting("NULL", false), zmtpCommand("READY", zmtpProperty("Identity", "x")[:6])...))
	f.Fuzz(func(t *testing.T, data []byte) {
		pub, err := fuzzReplayPublisher()
		if err != nil {
			t.Fatal(err)
		}
		addr := replayAddr(t, pub)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write(data) // the socket may have hung up already
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c)

		got, err := replayErr(t.Context(), addr, seqBytes(0))
		if err != nil || len(got) != 4 {
			t.Fatalf("the replay socket no longer serves: %d of 4 batches, %v", len(got), err)
		}
	})
}

// TestLibzmqReplay has libzmq's DEALER (pyzmq's bundled 4.3.x) ask the
// replay socket for everything from batch 1 on, without credentials and
// with PLAIN ones: it receives, as libzmq frames them, ["", topic, seq,
// payload] for batches 1 to 3, each a 3-field msgpack batch equal to what
// a Go client is replayed, then ["", "", -1, ""].
func TestLibzmqReplay(t *testing.T) {
	python := os.Getenv("SLUICE_KVEVENTS_PYTHON")
	if python == "" {
		t.Skip("SLUICE_KVEVENTS_PYTHON unset: make kvevents-check runs this with pyzmq")
	}
	for _, creds := range []*Credentials{nil, {User: "indexer", Password: "s3cret"}} {
		pub := newLoopbackPublisher(t, Config{ReplayEndpoint: "tcp://127.0.0.1:0", Credentials: creds})
		sendBatches(t, pub, 3, 1)
		var opts []zmq4.Option
		args := []string{"testdata/libzmq_replay.py", "tcp://" + replayAddr(t, pub), "1"}
		if creds != nil {
			opts = append(opts, zmq4.WithSecurity(plain.Security(creds.User, creds.Password)))
			args = append(args, creds.User+":"+creds.Password)
		}
		want := replayFrom(t, replayAddr(t, pub), seqBytes(1), opts...)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("auth %v: %v", creds != nil, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != len(want)+1 || len(want) != 3 {
			t.Fatalf("auth %v: libzmq got %d replies, Go %d batches", creds != nil, len(lines), len(want))
		}
		for i, line := range lines {
			var r struct {
				Frames   []string
				BatchLen int `json:"batch_len"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			wantFrames := []string{"", hex.EncodeToString(endSeq), ""}
			wantLen := -1
			if i < len(want) {
				wantFrames, wantLen = nil, 3
				for _, f := range want[i] {
					wantFrames = append(wantFrames, hex.EncodeToString(f))
				}
			}
			if !slices.Equal(r.Frames, append([]string{""}, wantFrames...)) || r.BatchLen != wantLen {
				t.Errorf("auth %v, reply %d: libzmq read %v (batch of %d fields)", creds != nil, i, r.Frames, r.BatchLen)
			}
		}
	}
}
