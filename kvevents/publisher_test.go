package kvevents

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
)

// nextModel predicts token+1 after every row: deterministic, so equal
// prompts continue equally and share blocks past the prompt too.
type nextModel struct {
	vocab  int
	logits []float32
}

func (m *nextModel) VocabSize() int  { return m.vocab }
func (m *nextModel) ContextLen() int { return 1024 }
func (m *nextModel) Forward(b *kernels.Batch) ([]float32, error) {
	m.logits = slices.Grow(m.logits[:0], len(b.LogitRows)*m.vocab)[:len(b.LogitRows)*m.vocab]
	clear(m.logits)
	for i, row := range b.LogitRows {
		m.logits[i*m.vocab+int(b.Tokens[row]+1)%m.vocab] = 1
	}
	return m.logits, nil
}

const testBS = 16

// subscribe connects a SUB socket to p and waits until p knows of the
// subscription, so that nothing sent from then on is lost to ZeroMQ's slow
// joiner. Messages arrive on the returned channel.
func subscribe(t *testing.T, p *Publisher) <-chan zmq4.Msg {
	t.Helper()
	sub := zmq4.NewSub(t.Context())
	t.Cleanup(func() { _ = sub.Close() })
	if err := sub.Dial(fmt.Sprintf("tcp://127.0.0.1:%d", addrPort(t, p))); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil { // llm-d's filter
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(p.sock.(zmq4.Topics).Topics()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the publisher never saw the subscription")
		}
		time.Sleep(time.Millisecond) // polling a state ZeroMQ gives no signal for
	}
	msgs := make(chan zmq4.Msg, 1024)
	go func() {
		for {
			m, err := sub.Recv()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	return msgs
}

func addrPort(t *testing.T, p *Publisher) int {
	t.Helper()
	a, ok := p.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("publisher bound to %v", p.Addr())
	}
	return a.Port
}

// TestEngineStreamMatchesPool runs an engine whose pool publishes through a
// real ZeroMQ socket, sends requests in three families that share long
// prefixes through a pool small enough to evict, and replays the decoded
// stream as llm-d's indexer would: every hash is the prefix cache's own
// chained hash of the tokens it carries, parents chain to blocks stored
// before, removals name stored blocks, and what is left stored is exactly
// the pool's cached blocks once every request has ended.
func TestEngineStreamMatchesPool(t *testing.T) {
	pub, err := New(t.Context(), Config{Endpoint: "tcp://*:0", Pod: "sluice-0", Model: "smol", Medium: MediumCPU, BlockSize: testBS, MaxBatch: 8})
	if err != nil {
		t.Fatal(err)
	}
	msgs := subscribe(t, pub)
	eng, err := engine.New(&nextModel{vocab: 64}, engine.Config{Blocks: 48, BlockSize: testBS, MaxSeqs: 4, KVEvents: pub})
	if err != nil {
		t.Fatal(err)
	}
	prompts := familyPrompts(3, 8)
	seqs := make([]*engine.Sequence, 0, len(prompts))
	for i, p := range prompts {
		s, err := eng.Submit(t.Context(), engine.Request{ID: fmt.Sprint(i), Prompt: p, MaxTokens: 20})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, s)
		if i%3 == 2 { // waves, so later ones find earlier ones' blocks cached
			for _, s := range seqs {
				<-s.Done()
			}
		}
	}
	for _, s := range seqs {
		<-s.Done()
		if r := s.Result(); r.Finish != engine.FinishLength {
			t.Fatalf("sequence %s ended %+v", s.Request().ID, r)
		}
	}
	if err := eng.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := eng.Stats()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	batches := drain(t, ctx, pub, msgs)

	r := newReplay(MediumCPU)
	for _, d := range batches {
		if err := r.apply(d); err != nil {
			t.Fatal(err)
		}
	}
	if st.KV.Used != 0 || len(r.live) != st.KV.Cached {
		t.Errorf("stream leaves %d blocks stored; pool: %+v (all requests ended: used 0, every indexed block cached)", len(r.live), st.KV)
	}
	if r.removed != int(st.KVEvicts) || r.removed == 0 {
		t.Errorf("stream removed %d blocks, pool evicted %d (want equal, > 0)", r.removed, st.KVEvicts)
	}
	if st.PrefixHitTokens == 0 {
		t.Error("no prefix hits: the requests shared nothing")
	}
	// Each prompt's full blocks were computed, so committed: the stream must
	// have stored each under the hash the prefix cache gives it.
	for i, p := range prompts {
		var parent uint64
		for end := testBS; end <= len(p); end += testBS {
			h := kvcache.BlockHash(parent, p[end-testBS:end])
			if !r.ever[block{0, h}] {
				t.Fatalf("prompt %d: block ending at %d (hash %x) never stored", i, end, h)
			}
			parent = h
		}
	}
	t.Logf("%d batches, %d blocks stored, %d removed, %d left; pool %+v, %d evictions, %d hit tokens",
		len(batches), len(r.ever), r.removed, len(r.live), st.KV, st.KVEvicts, st.PrefixHitTokens)
	if pub.Dropped() != 0 {
		t.Errorf("%d events dropped", pub.Dropped())
	}
}

// TestPoolStreamMatchesIndex drives a pool directly (admit with the cached
// prefix, compute, commit, free: a scheduler's calls) under prefix sharing
// and eviction, and compares the index rebuilt from the wire with the pool's
// own, hash for hash.
func TestPoolStreamMatchesIndex(t *testing.T) {
	pub, err := New(t.Context(), Config{Endpoint: "tcp://*:0", Pod: "sluice-0", Model: "smol", Medium: MediumCPU, BlockSize: testBS, MaxBatch: 5})
	if err != nil {
		t.Fatal(err)
	}
	msgs := subscribe(t, pub)
	pool, err := kvcache.NewPool(kvcache.Config{Blocks: 20, BlockSize: testBS, PrefixCaching: true, Events: pub})
	if err != nil {
		t.Fatal(err)
	}
	var pre kvcache.Prefix
	for round := range 3 {
		for _, p := range familyPrompts(3, 4) {
			var tb kvcache.Table
			hit := pool.Lookup(&pre, p, len(p)-1)
			if !pool.Allocate(&tb, &pre, len(p), 0) {
				t.Fatalf("round %d: %d tokens (%d cached) do not fit", round, len(p), hit)
			}
			pool.Commit(&tb, p, len(p))
			pool.Free(&tb)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r := newReplay(MediumCPU)
	for _, d := range drain(t, ctx, pub, msgs) {
		if err := r.apply(d); err != nil {
			t.Fatal(err)
		}
	}
	indexed := indexedBlocks(pool)
	if !maps.Equal(indexed, r.live) {
		t.Errorf("the pool indexes %d blocks, the stream leaves %d stored, not the same", len(indexed), len(r.live))
	}
	if st := pool.Stats(); r.removed != int(st.Evictions) || st.Evictions == 0 || st.HitBlocks == 0 {
		t.Errorf("%d removed; pool %+v: want as many removals as evictions, and hits", r.removed, st)
	}
}

// familyPrompts makes n prompts per family: a family's prompts share a
// 3-block prefix and differ in a 1–2 block tail.
func familyPrompts(families, n int) [][]int32 {
	var out [][]int32
	for f := range families {
		base := make([]int32, 3*testBS)
		for i := range base {
			base[i] = int32((f*7 + i*3) % 50)
		}
		for k := range n {
			p := slices.Clone(base)
			for i := range testBS + k*5 {
				p = append(p, int32((f+k*11+i)%50))
			}
			out = append(out, p)
		}
	}
	return out
}

// drain collects what pub has sent (catchUp) and closes pub.
func drain(t *testing.T, ctx context.Context, pub *Publisher, msgs <-chan zmq4.Msg) []decoded {
	t.Helper()
	defer func() {
		if err := pub.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	return catchUp(t, ctx, pub, msgs, 0)
}

// catchUp waits until pub has handed every event to its socket, then
// collects batches until the last one it sent has arrived; none when it
// has sent none from batch next on.
func catchUp(t *testing.T, ctx context.Context, pub *Publisher, msgs <-chan zmq4.Msg, next uint64) []decoded {
	t.Helper()
	for pub.pending.Load() != 0 {
		if ctx.Err() != nil {
			t.Fatalf("%d events never sent", pub.pending.Load())
		}
		time.Sleep(time.Millisecond) // the sender gives no signal; it is seconds at most
	}
	if pub.Batches() <= next {
		return nil
	}
	last := pub.Batches() - 1
	var out []decoded
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatalf("subscriber closed after %d batches", len(out))
			}
			d, err := decodeMessage(m.Frames)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
			if d.seq == last {
				return out
			}
		case <-ctx.Done():
			t.Fatalf("%d of %d batches arrived", len(out), last+1)
		}
	}
}

// replay rebuilds a pod's index from its stream, as llm-d's indexer does,
// checking every rule a consumer relies on. Blocks are keyed by group and
// hash: a pool with a window group stores each hash in both.
type replay struct {
	medium  string
	live    map[block]bool
	ever    map[block]bool
	removed int
	nextSeq uint64
	first   bool
	window  int // the window group's W, once an event has named it
}

type block struct {
	group int
	hash  uint64
}

func newReplay(medium string) *replay {
	return &replay{medium: medium, live: map[block]bool{}, ever: map[block]bool{}, first: true}
}

// indexedBlocks is what pool's prefix index holds, in replay's keys.
func indexedBlocks(pool *kvcache.Pool) map[block]bool {
	out := map[block]bool{}
	pool.Indexed(func(g kvcache.Group, hash, _ uint64, _ []int32) { out[block{g.Index, hash}] = true })
	return out
}

// has is what kvcache.PredictHit asks of the rebuilt index.
func (r *replay) has(group int, hash uint64) bool { return r.live[block{group, hash}] }

// checkGroup: a BlockStored names its group as vLLM names a hybrid model's,
// consistently, or (kind "") not at all, which is the global group.
func (r *replay) checkGroup(ev *storedEv) error {
	switch {
	case ev.kind == "" && ev.group == 0 && ev.window == 0:
	case ev.kind == "full_attention" && ev.group == 0 && ev.window == 0:
	case ev.kind == "sliding_window" && ev.group == 1 && ev.window > 0 && (r.window == 0 || r.window == ev.window):
		r.window = ev.window
	default:
		return fmt.Errorf("BlockStored of group %d, kind %q, window %d (after window %d)", ev.group, ev.kind, ev.window, r.window)
	}
	return nil
}

func (r *replay) apply(d decoded) error {
	if d.topic != "kv@sluice-0@smol" {
		return fmt.Errorf("topic %q", d.topic)
	}
	// The subscriber joined after the first batch (AllBlocksCleared) went
	// out; from its first batch on, sequence numbers must have no gap.
	if !r.first && d.seq != r.nextSeq {
		return fmt.Errorf("batch %d after %d", d.seq, r.nextSeq-1)
	}
	r.first, r.nextSeq = false, d.seq+1
	for _, ev := range d.events {
		switch ev := ev.(type) {
		case *storedEv:
			if ev.blockSize != testBS || len(ev.tokens) != len(ev.hashes)*testBS || ev.medium != r.medium {
				return fmt.Errorf("BlockStored %+v", ev)
			}
			if err := r.checkGroup(ev); err != nil {
				return err
			}
			parent := ev.parent
			if parent != 0 && !r.ever[block{ev.group, parent}] {
				return fmt.Errorf("group %d: block %x chains from %x, never stored", ev.group, ev.hashes[0], parent)
			}
			for i, h := range ev.hashes {
				toks := make([]int32, testBS)
				for j := range toks {
					toks[j] = int32(ev.tokens[i*testBS+j])
				}
				if want := kvcache.BlockHash(parent, toks); h != want {
					return fmt.Errorf("block %x: parent %x and tokens %v hash to %x", h, parent, toks, want)
				}
				b := block{ev.group, h}
				if r.live[b] {
					return fmt.Errorf("group %d: block %x stored twice", ev.group, h)
				}
				r.live[b], r.ever[b] = true, true
				parent = h
			}
		case *removedEv:
			if ev.medium != r.medium {
				return fmt.Errorf("BlockRemoved %+v", ev)
			}
			for _, h := range ev.hashes {
				b := block{ev.group, h}
				if !r.live[b] {
					return fmt.Errorf("group %d: block %x removed while not stored", ev.group, h)
				}
				delete(r.live, b)
				r.removed++
			}
		case clearedEv:
			clear(r.live)
		}
	}
	return nil
}
