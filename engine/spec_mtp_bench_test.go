package engine

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// mtpBenchSpec is a synthetic hybrid Qwen3.5 of Qwen3.5-0.8B's layer
// shapes (hidden 1024, FFN 3584, 8 query heads of 256 over 2 KV heads,
// DeltaNet 16 heads of 128) cut to 8 layers (attention every 4th) and a
// 32768-token vocabulary, with an MTP block, Q8_0: 160 MB.
var mtpBenchSpec = modeltest.Qwen35Spec{Layers: 8, Hidden: 1024, FFN: 3584, Vocab: 32768, Heads: 8, KVHeads: 2, HeadDim: 256,
	Interval: 4, KHeads: 16, VHeads: 16, StateSize: 128, ContextLen: 4096, Seed: 71, MTP: true}

// BenchmarkMTPSpec: decode tokens/s with the MTP head as the proposer
// (self-tuned, K 3) against plain decoding on the synthetic model above,
// one stream and four, for a head that is always right and one that is
// always wrong: "echo" is the tied-embedding model, whose greedy output
// repeats one token, with modeltest's MTPEcho head (it guesses the trunk's
// last guess: every draft accepted), "random" the untied model with a
// random head (about none accepted). Random weights leave no middle
// ground; what a trained head accepts is between. Each iteration
// generates once plainly and once with the head, so a loaded machine slows
// both alike; the time counted runs from the batch's first token to its
// last.
func BenchmarkMTPSpec(b *testing.B) {
	const gen, k = 64, 3
	for _, c := range []struct {
		name       string
		tied, echo bool
	}{{"echo", true, true}, {"random", false, false}} {
		spec := mtpBenchSpec
		spec.Tied, spec.MTPEcho = c.tied, c.echo
		path := filepath.Join(b.TempDir(), "mtp-bench.gguf")
		if err := modeltest.WriteQwen35GGUF(path, spec, kernels.Q8_0); err != nil {
			b.Fatal(err)
		}
		for _, seqs := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/seqs=%d", c.name, seqs), func(b *testing.B) {
				rows := seqs * (1 + k)
				be := cpu.New(2) // one backend for both, as the loader's draft: no idle helpers spinning
				b.Cleanup(func() { be.Close() })
				pm, _ := loadMTPBench(b, be, path, rows)
				plain := newEngineOn(b, pm, Config{Blocks: 64, BlockSize: 16, MaxSeqs: seqs})
				mm, g := loadMTPBench(b, be, path, rows)
				h, err := mm.NewMTP(g, 64)
				if err != nil {
					b.Fatal(err)
				}
				me := newEngineOn(b, mm, Config{Blocks: 64, BlockSize: 16, MaxSeqs: seqs,
					Speculate: SpecConfig{Method: "mtp", K: k, LogitRows: rows, MTP: h}})
				engines := []*Engine{plain, me}
				dur := make([]time.Duration, 2)
				toks := make([]int, 2)
				for b.Loop() {
					for i, e := range engines {
						ss := make([]*Sequence, seqs)
						for j := range ss {
							ss[j] = submit(b, e, Request{Prompt: prompt(24, int32(j), spec.Vocab), MaxTokens: gen, IgnoreEOS: true})
						}
						var start time.Time
						var once sync.Once
						var wg sync.WaitGroup
						var mu sync.Mutex
						for _, s := range ss {
							wg.Go(func() {
								<-s.Tokens()
								once.Do(func() { start = time.Now() })
								n := 0
								for range s.Tokens() {
									n++
								}
								mu.Lock()
								toks[i] += n
								mu.Unlock()
							})
						}
						wg.Wait()
						dur[i] += time.Since(start)
					}
				}
				p := float64(toks[0]) / dur[0].Seconds()
				b.ReportMetric(p, "plain-tok/s")
				b.ReportMetric(float64(toks[1])/dur[1].Seconds()/p, "mtp-speedup")
				st := me.Stats()
				if st.SpecDraftTokens > 0 {
					b.ReportMetric(float64(st.SpecAcceptedTokens)/float64(st.SpecDraftTokens), "accept")
				}
				b.ReportMetric(float64(st.SpecDraftTokens)/float64(max(toks[1], 1)), "drafts/tok")
				b.ReportMetric(float64(me.mtp.forwards)/float64(max(toks[1], 1)), "headfwd/tok")
			})
		}
	}
}

func loadMTPBench(tb testing.TB, be kernels.Backend, path string, rows int) (*models.Qwen35, *models.GGUFFile) {
	tb.Helper()
	g, err := models.OpenGGUF(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	m, err := models.LoadQwen35(g, be, models.Options{KVBlocks: 64, BlockSize: 16, MaxBatchTokens: 512, MaxSeqs: rows})
	if err != nil {
		tb.Fatal(err)
	}
	return m, g
}

// BenchmarkMTPHeadForward prices a draft: one decode row through the MTP
// head (its layer and the LM head) against one through the whole target,
// on mtpBenchSpec, alternated in the same loop so that a loaded machine
// weighs on both; head/target is what a draft costs in target steps.
func BenchmarkMTPHeadForward(b *testing.B) {
	path := filepath.Join(b.TempDir(), "mtp-bench.gguf")
	if err := modeltest.WriteQwen35GGUF(path, mtpBenchSpec, kernels.Q8_0); err != nil {
		b.Fatal(err)
	}
	be := cpu.New(2)
	b.Cleanup(func() { be.Close() })
	m, g := loadMTPBench(b, be, path, 4)
	h, err := m.NewMTP(g, 8)
	if err != nil {
		b.Fatal(err)
	}
	const ctx = 64
	batch := func(pos int, logits bool) *kernels.Batch {
		table := []int32{0, 1, 2, 3, 4}
		bt := &kernels.Batch{Tokens: []int32{int32(pos % mtpBenchSpec.Vocab)}, Positions: []int32{int32(pos)}, Slots: []int32{int32(pos)},
			Seqs: []kernels.SeqRows{{Start: 0, End: 1, ContextLen: pos + 1, Prompt: 1, Blocks: table}}}
		if logits {
			bt.LogitRows = []int32{0}
		}
		return bt
	}
	for p := range ctx { // a context to attend over, in both KV stores
		if _, err := m.Forward(batch(p, false)); err != nil {
			b.Fatal(err)
		}
		if _, err := h.Forward(batch(p, false), []int32{0}, false); err != nil {
			b.Fatal(err)
		}
	}
	var target, head time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := m.Forward(batch(ctx, true)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := h.Forward(batch(ctx, true), []int32{0}, false); err != nil {
			b.Fatal(err)
		}
		target, head = target+t1.Sub(t0), head+time.Since(t1)
	}
	b.ReportMetric(float64(target.Microseconds())/float64(b.N), "target-µs")
	b.ReportMetric(float64(head.Microseconds())/float64(b.N), "head-µs")
	b.ReportMetric(head.Seconds()/target.Seconds(), "head/target")
}
