package kvevents

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kvcache"
)

// TestWindowStreamPredictsHits runs an engine with kvcache's window group
// (a window of 24 positions, as a Gemma-3-style model's window layers read)
// whose pool publishes through a real ZeroMQ socket, one request at a time:
// prompts longer than the window, in families that share prefixes, through
// a window group small enough to evict. Before each request a consumer
// holding only the decoded stream predicts the prefix hit with
// kvcache.PredictHit, and the engine must serve exactly that many cached
// tokens. At the end the stream's blocks, group by group, are the pool's.
func TestWindowStreamPredictsHits(t *testing.T) {
	const window = 24
	pub, err := New(t.Context(), Config{Endpoint: "tcp://*:0", Pod: "sluice-0", Model: "smol", Medium: MediumCPU, BlockSize: testBS, MaxBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	msgs := subscribe(t, pub)
	eng, err := engine.New(&nextModel{vocab: 64}, engine.Config{Blocks: 40, BlockSize: testBS, MaxSeqs: 1, MaxBatchTokens: 64,
		Window: window, WindowBlocks: 10, KVEvents: pub})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r := newReplay(MediumCPU)
	prompts := familyPrompts(3, 3)
	var order [][]int32
	for round := range 3 {
		for i := range prompts {
			order = append(order, prompts[(i*(round+1))%len(prompts)])
		}
		order = append(order, order[len(order)-1]) // the same again: a hit past the window
	}
	var trimmed, pastWindow int
	for i, p := range order {
		// Batch 0 (AllBlocksCleared) went out before the subscription.
		for _, d := range catchUp(t, ctx, pub, msgs, max(r.nextSeq, 1)) {
			if err := r.apply(d); err != nil {
				t.Fatal(err)
			}
		}
		want := kvcache.PredictHit(p, len(p)-1, testBS, window, r.has)
		s, err := eng.Submit(ctx, engine.Request{ID: fmt.Sprint(i), Prompt: p, MaxTokens: 6})
		if err != nil {
			t.Fatal(err)
		}
		<-s.Done() // the step that finished it committed its blocks first
		res := s.Result()
		if res.Finish != engine.FinishLength {
			t.Fatalf("request %d ended %+v", i, res)
		}
		if res.CachedTokens != want {
			t.Fatalf("request %d (%d prompt tokens): the stream predicts a hit of %d tokens, the engine served %d", i, len(p), want, res.CachedTokens)
		}
		if kvcache.PredictHit(p, len(p)-1, testBS, 0, r.has) > want {
			trimmed++ // the global group alone promised more
		}
		if want > window {
			pastWindow++
		}
	}
	if err := eng.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st := eng.Stats()
	for _, d := range catchUp(t, ctx, pub, msgs, r.nextSeq) {
		if err := r.apply(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r.window != window {
		t.Errorf("the stream named window %d", r.window)
	}
	// Every request has ended: each group's indexed blocks are its cached ones.
	var live [2]int
	for b := range r.live {
		live[b.group]++
	}
	if st.KV.Used != 0 || st.KVWindow.Used != 0 || live[0] != st.KV.Cached || live[1] != st.KVWindow.Cached {
		t.Errorf("the stream leaves %d global and %d window blocks stored; pool: global %+v, window %+v", live[0], live[1], st.KV, st.KVWindow)
	}
	windowRemoved := 0
	for b := range r.ever {
		if b.group == 1 && !r.live[b] {
			windowRemoved++
		}
	}
	t.Logf("%d requests: %d hits trimmed by the window group, %d past the window; %d window blocks removed; %+v", len(order), trimmed, pastWindow, windowRemoved, st.KVWindow)
	if trimmed == 0 || pastWindow == 0 || windowRemoved == 0 {
		t.Errorf("%d trimmed, %d past the window, %d window blocks removed: the test exercises too little", trimmed, pastWindow, windowRemoved)
	}
}
