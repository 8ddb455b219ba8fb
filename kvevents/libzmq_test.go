package kvevents

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/sluicehq/sluice/kvcache"
)

// TestLibzmqSubscriber has libzmq itself (pyzmq's bundled 4.3.x, what
// llm-d's indexer links through pebbe/zmq4) subscribe to the pure-Go PUB
// socket, and Python's msgpack decode the batches, so the wire is checked
// against implementations other than the ones that wrote it. make
// kvevents-check provides the interpreter (a pinned venv) in
// SLUICE_KVEVENTS_PYTHON.
func TestLibzmqSubscriber(t *testing.T) {
	python := os.Getenv("SLUICE_KVEVENTS_PYTHON")
	if python == "" {
		t.Skip("SLUICE_KVEVENTS_PYTHON unset: make kvevents-check runs this with pyzmq")
	}
	pub, err := New(t.Context(), Config{Endpoint: "tcp://*:0", Pod: "sluice-0", Model: "smol", Medium: MediumGPU, BlockSize: testBS, MaxBatch: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "testdata/libzmq_sub.py", fmt.Sprintf("tcp://127.0.0.1:%d", addrPort(t, pub)))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	lines.Buffer(nil, 1<<24)
	if !lines.Scan() || lines.Text() != "ready" {
		t.Fatalf("subscriber: %q %v", lines.Text(), lines.Err())
	}
	for deadline := time.Now().Add(10 * time.Second); len(pub.sock.(zmq4.Topics).Topics()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the publisher never saw libzmq's subscription")
		}
		time.Sleep(time.Millisecond) // ZeroMQ gives no signal for it
	}

	pool, err := kvcache.NewPool(kvcache.Config{Blocks: 20, BlockSize: testBS, PrefixCaching: true, Events: pub})
	if err != nil {
		t.Fatal(err)
	}
	var pre kvcache.Prefix
	for range 2 {
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
		if ctx.Err() != nil {
			t.Fatal("events never sent")
		}
		time.Sleep(time.Millisecond) // the sender gives no signal; it is seconds at most
	}
	last := pub.Batches() - 1

	r := newReplay(MediumGPU)
	for lines.Scan() {
		d, err := fromPython(lines.Bytes())
		if err != nil {
			t.Fatalf("%v: %s", err, lines.Text())
		}
		if err := r.apply(d); err != nil {
			t.Fatal(err)
		}
		if d.seq == last {
			break
		}
	}
	if err := lines.Err(); err != nil || r.nextSeq != last+1 {
		t.Fatalf("read up to batch %d of %d: %v", r.nextSeq, last+1, err)
	}
	indexed := indexedBlocks(pool)
	if !maps.Equal(indexed, r.live) || r.removed == 0 {
		t.Errorf("through libzmq: %d live, %d removed; the pool indexes %d", len(r.live), r.removed, len(indexed))
	}
}

// fromPython reads one line of libzmq_sub.py into a decoded batch, checking
// the frame layout and each event's arity as Python saw them.
func fromPython(line []byte) (decoded, error) {
	var b struct {
		Frames   int
		SeqLen   int `json:"seq_len"`
		BatchLen int `json:"batch_len"`
		Topic    string
		Seq      uint64
		TS       float64
		Events   [][]any
	}
	if err := json.Unmarshal(line, &b); err != nil {
		return decoded{}, err
	}
	if b.Frames != 3 || b.SeqLen != 8 || b.BatchLen != 3 {
		return decoded{}, fmt.Errorf("frames %d, sequence of %d bytes, batch of %d fields", b.Frames, b.SeqLen, b.BatchLen)
	}
	d := decoded{topic: b.Topic, seq: b.Seq, ts: b.TS}
	for _, f := range b.Events {
		switch f[0] {
		case "BlockStored":
			if len(f) != 8 || f[5] != nil || f[7] != nil {
				return d, fmt.Errorf("BlockStored %v: want 8 fields, no LoRA", f)
			}
			ev := &storedEv{medium: f[6].(string), blockSize: int(f[4].(float64))}
			ev.hashes = parseHashes(f[1].([]any))
			if f[2] != nil {
				ev.parent = parseHashes([]any{f[2]})[0]
			}
			for _, x := range f[3].([]any) {
				ev.tokens = append(ev.tokens, uint32(x.(float64)))
			}
			d.events = append(d.events, ev)
		case "BlockRemoved":
			if len(f) != 3 {
				return d, fmt.Errorf("BlockRemoved %v: want 3 fields", f)
			}
			d.events = append(d.events, &removedEv{hashes: parseHashes(f[1].([]any)), medium: f[2].(string)})
		case "AllBlocksCleared":
			d.events = append(d.events, clearedEv{})
		default:
			return d, fmt.Errorf("event %v", f)
		}
	}
	return d, nil
}

func parseHashes(xs []any) []uint64 {
	out := make([]uint64, len(xs))
	for i, x := range xs {
		out[i], _ = strconv.ParseUint(x.(string), 10, 64)
	}
	return out
}
