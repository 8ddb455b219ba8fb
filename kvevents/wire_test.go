package kvevents

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kvcache"
)

// one is the group of a pool without a window group.
var one = kvcache.Group{Groups: 1}

func TestEncodeBatchLayout(t *testing.T) {
	toks := func(base int32) []int32 { return []int32{base, base + 1} }
	evs := []event{
		{kind: cleared},
		{kind: stored, group: one, hash: 10, parent: 0, tokens: toks(1)},
		{kind: stored, group: one, hash: 11, parent: 10, tokens: toks(3)},
		{kind: stored, group: one, hash: 12, parent: 11, tokens: toks(5)},
		{kind: stored, group: one, hash: 20, parent: 10, tokens: toks(7)}, // a fork: a new event
		{kind: removed, group: one, hash: 12},
		{kind: removed, group: one, hash: 1 << 63},
		{kind: stored, group: one, hash: 30, parent: 20, tokens: toks(9)},
	}
	payload, err := encodeBatch(time.Unix(1700000000, 5e8), evs, 2, MediumGPU)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeMessage([][]byte{[]byte("kv@p@m"), make([]byte, 8), payload})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		clearedEv{},
		&storedEv{hashes: []uint64{10, 11, 12}, tokens: []uint32{1, 2, 3, 4, 5, 6}, blockSize: 2, medium: "GPU"},
		&storedEv{hashes: []uint64{20}, parent: 10, tokens: []uint32{7, 8}, blockSize: 2, medium: "GPU"},
		&removedEv{hashes: []uint64{12, 1 << 63}, medium: "GPU"},
		&storedEv{hashes: []uint64{30}, parent: 20, tokens: []uint32{9, 10}, blockSize: 2, medium: "GPU"},
	}
	if !reflect.DeepEqual(d.events, want) {
		t.Errorf("decoded %#v\nwant %#v", d.events, want)
	}
	if d.ts != 1700000000.5 {
		t.Errorf("ts %v", d.ts)
	}
}

// TestEncodeGroupLayout: a pool with a window group names each event's
// group as vLLM does a hybrid model's: BlockStored with extra_keys (nil),
// group_idx, kv_cache_spec_kind and kv_cache_spec_sliding_window after its
// eight fields, BlockRemoved with group_idx after its three; a chain or a
// run of removals never spans two groups, though the hashes are the same.
func TestEncodeGroupLayout(t *testing.T) {
	global, window := kvcache.Group{Index: 0, Groups: 2}, kvcache.Group{Index: 1, Window: 512, Groups: 2}
	evs := []event{
		{kind: stored, group: global, hash: 10, tokens: []int32{1, 2}},
		{kind: stored, group: window, hash: 10, tokens: []int32{1, 2}},
		{kind: stored, group: window, hash: 11, parent: 10, tokens: []int32{3, 4}},
		{kind: stored, group: global, hash: 11, parent: 10, tokens: []int32{3, 4}},
		{kind: removed, group: window, hash: 10},
		{kind: removed, group: global, hash: 10},
	}
	payload, err := encodeBatch(time.Unix(1700000000, 0), evs, 2, MediumCPU)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeMessage([][]byte{nil, make([]byte, 8), payload})
	if err != nil {
		t.Fatal(err)
	}
	full := func(hashes []uint64, parent uint64, toks ...uint32) *storedEv {
		return &storedEv{hashes: hashes, parent: parent, tokens: toks, blockSize: 2, medium: "CPU", kind: "full_attention"}
	}
	want := []any{
		full([]uint64{10}, 0, 1, 2),
		&storedEv{hashes: []uint64{10, 11}, tokens: []uint32{1, 2, 3, 4}, blockSize: 2, medium: "CPU", group: 1, kind: "sliding_window", window: 512},
		full([]uint64{11}, 10, 3, 4),
		&removedEv{hashes: []uint64{10}, medium: "CPU", group: 1, grouped: true},
		&removedEv{hashes: []uint64{10}, medium: "CPU", grouped: true},
	}
	if !reflect.DeepEqual(d.events, want) {
		t.Errorf("decoded %#v\nwant %#v", d.events, want)
	}
}

// TestSmallHashesStayUint64: llm-d's decoder takes a hash only as uint64 or
// int64, which a compact msgpack int would not be for a small value.
func TestSmallHashesStayUint64(t *testing.T) {
	payload, err := encodeBatch(time.Now(), []event{{kind: stored, group: one, hash: 5, parent: 3, tokens: []int32{1}}}, 1, MediumCPU)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decodeMessage([][]byte{nil, make([]byte, 8), payload})
	if err != nil {
		t.Fatal(err)
	}
	if ev := d.events[0].(*storedEv); ev.hashes[0] != 5 || ev.parent != 3 || ev.medium != "CPU" {
		t.Errorf("%+v", ev)
	}
}

// TestOfferNeverBlocks: past the buffer, events are counted, not waited for.
func TestOfferNeverBlocks(t *testing.T) {
	p := &Publisher{events: make(chan event, 2)} // no sender: nothing drains
	for i := range 5 {
		p.BlockRemoved(kvcache.Group{Groups: 1}, uint64(i))
	}
	p.BlockStored(kvcache.Group{Groups: 1}, 9, 0, []int32{1})
	if p.Dropped() != 4 || len(p.events) != 2 {
		t.Errorf("dropped %d, buffered %d; want 4, 2", p.Dropped(), len(p.events))
	}
}

func TestNewRejects(t *testing.T) {
	for _, cfg := range []Config{
		{Endpoint: "tcp://*:0", Model: "m", Medium: MediumGPU, BlockSize: 16},
		{Endpoint: "tcp://*:0", Pod: "a@b", Model: "m", Medium: MediumGPU, BlockSize: 16},
		{Endpoint: "tcp://*:0", Pod: "p", Model: "m", Medium: "gpu", BlockSize: 16},
		{Endpoint: "tcp://*:0", Pod: "p", Model: "m", Medium: MediumGPU},
		{Endpoint: "bogus://x", Pod: "p", Model: "m", Medium: MediumGPU, BlockSize: 16},
	} {
		if p, err := New(t.Context(), cfg); err == nil {
			_ = p.Close(t.Context())
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
