package kvevents

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
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
	// A window model's pool on the same stream, on other tokens: its events
	// carry vLLM's group fields.
	wpool, err := kvcache.NewPool(kvcache.Config{Blocks: 20, BlockSize: testBS, PrefixCaching: true, Events: pub,
		Window: kvcache.WindowConfig{Window: 24, Blocks: 8}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, p := range familyPrompts(3, 4) {
			for i := range p {
				p[i] += 50
			}
			var tb kvcache.Table
			wpool.Lookup(&pre, p, len(p)-1)
			if !wpool.Allocate(&tb, &pre, len(p), 0) {
				t.Fatal("allocate failed")
			}
			wpool.Commit(&tb, p, len(p))
			wpool.Free(&tb)
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
	maps.Copy(indexed, indexedBlocks(wpool))
	windowLive := 0
	for b := range r.live {
		windowLive += b.group
	}
	if !maps.Equal(indexed, r.live) || r.removed == 0 || r.window != 24 || windowLive == 0 {
		t.Errorf("through libzmq: %d live (%d of the window group, window %d), %d removed; the pools index %d",
			len(r.live), windowLive, r.window, r.removed, len(indexed))
	}
}

// fromPython reads one line of libzmq_sub.py into a decoded batch, checking
// the frame layout and each event's arity as Python saw them, and that
// msgspec, decoding into vLLM's own event layout, read the same events.
func fromPython(line []byte) (decoded, error) {
	var b struct {
		Frames    int
		SeqLen    int `json:"seq_len"`
		BatchLen  int `json:"batch_len"`
		Topic     string
		Seq       uint64
		TS        float64
		Events    [][]any
		Vllm      []vllmEvent
		VllmError string `json:"vllm_error"`
	}
	if err := json.Unmarshal(line, &b); err != nil {
		return decoded{}, err
	}
	if b.Frames != 3 || b.SeqLen != 8 || b.BatchLen != 3 {
		return decoded{}, fmt.Errorf("frames %d, sequence of %d bytes, batch of %d fields", b.Frames, b.SeqLen, b.BatchLen)
	}
	if b.VllmError != "" || len(b.Vllm) != len(b.Events) {
		return decoded{}, fmt.Errorf("vLLM's layout read %d of %d events: %s", len(b.Vllm), len(b.Events), b.VllmError)
	}
	d := decoded{topic: b.Topic, seq: b.Seq, ts: b.TS}
	for i, f := range b.Events {
		switch f[0] {
		case "BlockStored":
			if len(f) != 8 && len(f) != 12 || f[5] != nil || f[7] != nil {
				return d, fmt.Errorf("BlockStored %v: want 8 or 12 fields, no LoRA", f)
			}
			ev := &storedEv{medium: f[6].(string), blockSize: int(f[4].(float64))}
			ev.hashes = parseHashes(f[1].([]any))
			if f[2] != nil {
				ev.parent = parseHashes([]any{f[2]})[0]
			}
			for _, x := range f[3].([]any) {
				ev.tokens = append(ev.tokens, uint32(x.(float64)))
			}
			if len(f) == 12 {
				ev.group, ev.kind = int(f[9].(float64)), f[10].(string)
				if f[11] != nil {
					ev.window = int(f[11].(float64))
				}
			}
			d.events = append(d.events, ev)
		case "BlockRemoved":
			if len(f) != 3 && len(f) != 4 {
				return d, fmt.Errorf("BlockRemoved %v: want 3 or 4 fields", f)
			}
			ev := &removedEv{hashes: parseHashes(f[1].([]any)), medium: f[2].(string)}
			if len(f) == 4 {
				ev.group, ev.grouped = int(f[3].(float64)), true
			}
			d.events = append(d.events, ev)
		case "AllBlocksCleared":
			d.events = append(d.events, clearedEv{})
		default:
			return d, fmt.Errorf("event %v", f)
		}
		if err := b.Vllm[i].same(d.events[i]); err != nil {
			return d, fmt.Errorf("event %d, %v: %w", i, f, err)
		}
	}
	return d, nil
}

// vllmEvent is an event as msgspec decoded it into vLLM's structs.
type vllmEvent struct {
	Type      string
	Hashes    []string `json:"block_hashes"`
	Medium    string
	ExtraKeys []any   `json:"extra_keys"`
	Group     *int    `json:"group_idx"`
	Kind      *string `json:"kv_cache_spec_kind"`
	Window    *int    `json:"kv_cache_spec_sliding_window"`
	BlockSize int     `json:"block_size"`
	Tokens    []int   `json:"token_ids"`
}

// same reports whether v is the event msgpack's positional reading gave.
func (v vllmEvent) same(ev any) error {
	hashes := parseHashes(anys(v.Hashes))
	group, kind, window := -1, "", 0 // -1: no group_idx
	if v.Group != nil {
		group = *v.Group
	}
	if v.Kind != nil {
		kind = *v.Kind
	}
	if v.Window != nil {
		window = *v.Window
	}
	var ok bool
	switch ev := ev.(type) {
	case *storedEv:
		wantGroup := -1
		if ev.kind != "" {
			wantGroup = ev.group
		}
		ok = v.Type == "BlockStored" && slices.Equal(hashes, ev.hashes) && v.Medium == ev.medium && v.BlockSize == ev.blockSize &&
			len(v.Tokens) == len(ev.tokens) && v.ExtraKeys == nil && group == wantGroup && kind == ev.kind && window == ev.window
	case *removedEv:
		wantGroup := -1
		if ev.grouped {
			wantGroup = ev.group
		}
		ok = v.Type == "BlockRemoved" && slices.Equal(hashes, ev.hashes) && v.Medium == ev.medium && group == wantGroup
	case clearedEv:
		ok = v.Type == "AllBlocksCleared"
	}
	if !ok {
		return fmt.Errorf("vLLM's layout reads %+v (group %d, kind %q, window %d)", v, group, kind, window)
	}
	return nil
}

func anys(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func parseHashes(xs []any) []uint64 {
	out := make([]uint64, len(xs))
	for i, x := range xs {
		out[i], _ = strconv.ParseUint(x.(string), 10, 64)
	}
	return out
}

// TestLibzmqPlainSubscriber has libzmq subscribe with PLAIN credentials:
// with the publisher's it receives batches; with a wrong password its
// handshake is refused, so the publisher never sees its subscription.
func TestLibzmqPlainSubscriber(t *testing.T) {
	python := os.Getenv("SLUICE_KVEVENTS_PYTHON")
	if python == "" {
		t.Skip("SLUICE_KVEVENTS_PYTHON unset: make kvevents-check runs this with pyzmq")
	}
	pub := newLoopbackPublisher(t, Config{Credentials: &Credentials{User: "indexer", Password: "s3cret"}})
	ep := fmt.Sprintf("tcp://127.0.0.1:%d", addrPort(t, pub))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := func(creds string) *bufio.Scanner {
		cmd := exec.CommandContext(ctx, python, "testdata/libzmq_sub.py", ep, creds)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		lines := bufio.NewScanner(out)
		if !lines.Scan() || lines.Text() != "ready" {
			t.Fatalf("subscriber: %q %v", lines.Text(), lines.Err())
		}
		return lines
	}
	start("indexer:wrong")
	time.Sleep(time.Second) // libzmq retries its handshake; none may pass
	if topics := pub.sock.(zmq4.Topics).Topics(); len(topics) != 0 {
		t.Fatalf("a wrong password subscribed to %q", topics)
	}
	lines := start("indexer:s3cret")
	for deadline := time.Now().Add(10 * time.Second); len(pub.sock.(zmq4.Topics).Topics()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the publisher never saw the authenticated subscription")
		}
		time.Sleep(time.Millisecond) // ZeroMQ gives no signal for it
	}
	pub.BlockStored(kvcache.Group{Groups: 1}, 1, 0, make([]int32, testBS))
	if !lines.Scan() {
		t.Fatalf("no batch: %v", lines.Err())
	}
	d, err := fromPython(lines.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if d.topic != pub.Topic() || len(d.events) != 1 {
		t.Fatalf("got %+v", d)
	}
}
