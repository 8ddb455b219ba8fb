package engine

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// These tests run the engine on a hybrid model (Qwen3.5's Gated DeltaNet
// layers with full attention every second layer), whose recurrent state
// per sequence lives in the pool's state slots.

var hybridSpec = modeltest.Qwen35Spec{Layers: 4, Hidden: 64, FFN: 128, Vocab: 300, Heads: 4, KVHeads: 2, HeadDim: 16,
	RopeDims: 8, Interval: 2, KHeads: 2, VHeads: 4, StateSize: 16, ContextLen: 1024, Seed: 25}

// hookedHybrid is hooked (llama_test.go) over a model with state slots.
type hookedHybrid struct {
	*hooked
	r      RecurrentModel
	copies int // CopyState calls (forks that resumed from a checkpoint)
}

func (h *hookedHybrid) StateSlots() int       { return h.r.StateSlots() }
func (h *hookedHybrid) StateSlotBytes() int64 { return h.r.StateSlotBytes() }
func (h *hookedHybrid) CopyState(dst, src int32) error {
	h.copies++
	return h.r.CopyState(dst, src)
}

func loadHybrid(t testing.TB, blocks, batch, seqs int) *hookedHybrid {
	t.Helper()
	path := filepath.Join(t.TempDir(), "qwen35.gguf")
	if err := modeltest.WriteQwen35GGUF(path, hybridSpec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	g, err := models.OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	m, err := models.LoadQwen35(g, be, models.Options{KVBlocks: blocks, BlockSize: 16, MaxBatchTokens: batch, MaxSeqs: seqs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close(); g.Close() })
	return &hookedHybrid{hooked: &hooked{Model: m}, r: m}
}

// TestHybridBatchInvariance: each prompt's greedy output alone equals its
// output in a full batch with staggered arrivals, under preemption (a pool
// of 12 blocks for 8 sequences of up to 4 blocks: recomputed from position
// 0 in a fresh state slot), and as a repeat of a finished prompt, which hits
// the prefix cache up to the prompt's last block boundary and starts from
// the state cached there. Bit for bit: the DeltaNet kernel runs each row's
// recurrence the same way whatever the batch holds.
func TestHybridBatchInvariance(t *testing.T) {
	prompts := vocabPrompts(8, hybridSpec.Vocab)
	const n = 12
	m := loadHybrid(t, 64, 64, 8)
	e := newEngineOn(t, m, Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 64, MaxSeqs: 8})
	alone := make([][]int32, len(prompts))
	for i, p := range prompts {
		alone[i], _ = collect(t, submit(t, e, Request{Prompt: p, MaxTokens: n}), 0)
	}
	check := func(what string, got [][]int32) {
		t.Helper()
		for i := range prompts {
			if !slices.Equal(got[i], alone[i]) {
				t.Fatalf("%s: prompt %d: %v, alone %v", what, i, got[i], alone[i])
			}
		}
	}
	for _, i := range []int{7, 3} { // 40 and 20 tokens: hits of 32 and 16
		s := submit(t, e, Request{Prompt: prompts[i], MaxTokens: n})
		again, r := collect(t, s, 0)
		if want := (len(prompts[i]) - 1) / 16 * 16; !slices.Equal(again, alone[i]) || r.CachedTokens != want {
			t.Fatalf("repeat of prompt %d: %v (cached %d, want %d), first %v", i, again, r.CachedTokens, want, alone[i])
		}
	}
	if st := e.Stats(); st.PrefixHitTokens != 48 || st.KV.StatesTotal != 12 || st.KV.StatesCached == 0 || st.StateSlotBytes <= 0 {
		t.Fatalf("stats %+v", st)
	}
	check("together", runConcurrent(t, e, prompts, n)) // some start from cached states
	// A prompt that extends a cached one (the next turn of a chat) starts
	// from its state too, and gives what it gives on a fresh engine.
	next := append(slices.Clone(prompts[7]), prompts[2]...)
	got, r := collect(t, submit(t, e, Request{Prompt: next, MaxTokens: n}), 0)
	fresh := newEngineOn(t, m, Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 64, MaxSeqs: 8, DisablePrefixCache: true})
	want, _ := collect(t, submit(t, fresh, Request{Prompt: next, MaxTokens: n}), 0)
	if r.CachedTokens != 32 || !slices.Equal(got, want) {
		t.Fatalf("next turn: %v (cached %d), fresh %v", got, r.CachedTokens, want)
	}
	if err := fresh.Close(bg); err != nil {
		t.Fatal(err)
	}

	small := loadHybrid(t, 12, 32, 8)
	se := newEngineOn(t, small, Config{Blocks: 12, BlockSize: 16, MaxBatchTokens: 32, MaxSeqs: 8})
	check("preempted", runAtOnce(t, se, func(h func(*kernels.Batch) error) { small.hook = h }, prompts, n))
	if err := se.Close(bg); err != nil {
		t.Fatal(err)
	}
	if st := se.Stats(); st.Preemptions == 0 || st.KV.Used != 0 || st.KV.StatesUsed != 0 {
		t.Fatalf("stats %+v: want preemptions, no block or state slot in use", st)
	}
}

// TestHybridAbortFreesState: a hybrid sequence aborted between its prefill
// chunks or mid-decode has its state slot and blocks back in the pool when
// the next step starts, as the pool counts them.
func TestHybridAbortFreesState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		bPrompt int
		bSlots  int                         // slots b holds: its state, and a checkpoint at 96 while it prefills
		cancel  func(b *kernels.Batch) bool // cancel b inside this step
	}{
		{"mid-prefill", 100, 2, func(b *kernels.Batch) bool {
			return len(b.Seqs) == 2 && b.Seqs[1].Start != b.Seqs[1].End && b.Seqs[1].ContextLen < 100 && b.Seqs[1].ContextLen > 32
		}},
		{"mid-decode", 10, 1, func(b *kernels.Batch) bool { return len(b.Seqs) == 2 && b.Seqs[1].ContextLen == 13 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := loadHybrid(t, 64, 32, 4)
				e := newEngineOn(t, m, Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 32, MaxSeqs: 4})
				type rec struct {
					cancel       bool
					seqs, states int
					used, blocks int
				}
				var recs []rec
				ls := newLockstepHook(func(h func(*kernels.Batch) error) {
					m.hook = func(b *kernels.Batch) error {
						u := e.pool.Usage()
						r := rec{cancel: tc.cancel(b), seqs: len(b.Seqs), states: u.StatesUsed, used: u.Used}
						for _, s := range b.Seqs {
							r.blocks += len(s.Blocks)
						}
						recs = append(recs, r)
						return h(b)
					}
				}, e)
				a := submit(t, e, Request{Prompt: prompt(8, 1, 64), MaxTokens: 200})
				ls.next()
				ls.release()
				ctx, cancel := context.WithCancel(bg)
				b, err := e.Submit(ctx, Request{Prompt: prompt(tc.bPrompt, 2, 64), MaxTokens: 100})
				if err != nil {
					t.Fatal(err)
				}
				for ls.next(); !recs[len(recs)-1].cancel; ls.next() {
					ls.release()
				}
				if r := recs[len(recs)-1]; r.states != 1+tc.bSlots || r.used != r.blocks {
					t.Fatalf("step of the cancellation: %+v", r)
				}
				cancel()
				synctest.Wait()
				ls.release()
				ls.next()
				select {
				case <-b.Done():
				default:
					t.Fatal("b not ended before the next step")
				}
				if r := recs[len(recs)-1]; r.seqs != 1 || r.states != 1 || r.used != r.blocks {
					t.Fatalf("next step: %+v: want a alone, one state slot and a's blocks in use", r)
				}
				a.Abort(CauseStall)
				ls.release()
				a.Result()
				synctest.Wait()
				if st := e.Stats(); st.KV.Used != 0 || st.KV.StatesUsed != 0 || st.Reclaims != 2 {
					t.Fatalf("stats %+v", st)
				}
			})
		})
	}
}

// TestHybridGroup: the n choices of one prompt fork the leader's blocks up
// to the prompt's last block boundary (32 of 37 tokens) and start from the
// state the leader kept there, each in a slot of its own, and, greedy, give
// the output the prompt gives alone, bit for bit. A prompt split over
// steps (a batch of 16 tokens) keeps its checkpoint in the step reaching 32.
func TestHybridGroup(t *testing.T) {
	for _, batch := range []int{64, 16} {
		m := loadHybrid(t, 64, batch, 8)
		e := newEngineOn(t, m, Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: batch, MaxSeqs: 4})
		testHybridGroup(t, m, e)
	}
}

func testHybridGroup(t *testing.T, m *hookedHybrid, e *Engine) {
	p := prompt(37, 5, 64)
	want, _ := collect(t, submit(t, e, Request{Prompt: p, MaxTokens: 10}), 0)
	seqs, err := e.SubmitGroup(bg, []Request{{Prompt: p, MaxTokens: 10}, {Prompt: p, MaxTokens: 10}, {Prompt: p, MaxTokens: 10}})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		got, r := collect(t, s, 0)
		if !slices.Equal(got, want) || r.Finish != FinishLength || (i > 0 && r.CachedTokens != 32) {
			t.Fatalf("choice %d: %v (%+v), alone %v", i, got, r, want)
		}
	}
	if err := e.Close(bg); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.KV.Used != 0 || st.KV.StatesUsed != 0 || m.copies != 2 {
		t.Fatalf("stats %+v, %d states copied (want 2 forks)", st, m.copies)
	}
}

// TestHybridStatusShowsSlots: a status frame names a running hybrid
// sequence's state slot and, while it prefills a prompt past a block
// boundary, its checkpoint slot, and carries the pool's slot counts.
func TestHybridStatusShowsSlots(t *testing.T) {
	m := loadHybrid(t, 64, 16, 4)
	e := newEngineOn(t, m, Config{Blocks: 64, BlockSize: 16, MaxBatchTokens: 16, MaxSeqs: 4})
	w := e.WatchStatus()
	defer w.Close()
	held, release := make(chan struct{}), make(chan struct{})
	m.hook = func(*kernels.Batch) error { held <- struct{}{}; <-release; return nil }
	s := submit(t, e, Request{Prompt: prompt(40, 3, 64), MaxTokens: 2})
	<-held // the first of its three prefill steps
	release <- struct{}{}
	<-held // the second: the frame after the first is out, the loop waits here
	for {
		st, err := w.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Seqs) != 1 || st.Seqs[0].Computed != 16 {
			continue
		}
		if q := st.Seqs[0]; q.State < 0 || q.Checkpoint < 0 || q.State == q.Checkpoint || st.KV.StatesUsed != 2 || st.KV.StatesTotal != 6 {
			t.Fatalf("status %+v, KV %+v", q, st.KV)
		}
		break
	}
	m.hook = nil
	close(release)
	collect(t, s, 0)
}
