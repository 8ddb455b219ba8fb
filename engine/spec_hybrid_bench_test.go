package engine

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// benchHybridSpec is a synthetic hybrid of realistic layer widths for the
// speed of speculation on recurrent state: hidden 1024, 8 layers of which
// 6 Gated DeltaNet (16 value heads of 128: 1 MiB of delta-rule state per
// layer per sequence, Qwen3.5's head shape) and 2 full attention, Q8_0
// (about 150 MB of weights); the small vocabulary keeps the output head
// from dominating. Tied embeddings make its greedy output settle into a
// repeat after a few dozen tokens, which drafts then copy (the edit case:
// the answer repeats what came before); untied, the random weights give a
// chaotic output that drafts rarely guess (the free-text case).
func benchHybridSpec(tied bool) modeltest.Qwen35Spec {
	return modeltest.Qwen35Spec{Layers: 8, Hidden: 1024, FFN: 3072, Vocab: 300, Heads: 8, KVHeads: 2, HeadDim: 128,
		RopeDims: 32, Interval: 4, KHeads: 16, VHeads: 16, StateSize: 128, ContextLen: 4096, Tied: tied, Seed: 26}
}

func loadBenchHybrid(b *testing.B, spec modeltest.Qwen35Spec, threads, rows int) *models.Qwen35 {
	b.Helper()
	path := filepath.Join(b.TempDir(), "qwen35.gguf")
	if err := modeltest.WriteQwen35GGUF(path, spec, kernels.Q8_0); err != nil {
		b.Fatal(err)
	}
	g, err := models.OpenGGUF(path)
	if err != nil {
		b.Fatal(err)
	}
	be := cpu.New(threads)
	m, err := models.LoadQwen35(g, be, models.Options{KVBlocks: 64, BlockSize: 16, MaxBatchTokens: 256, MaxSeqs: rows})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close(); g.Close() })
	return m
}

// BenchmarkHybridSpeculative: single-stream decode tokens/s on
// benchHybridSpec at 2 threads with and without n-gram speculation (K 6,
// single-token matches and up),
// on an edit-style prompt (hybridEditPrompts: a passage and its start
// again): "repeat" on the tied model, whose output repeats, self-tuned;
// "chaotic" on the untied one, self-tuned and fixed (every draft tried:
// the cost of wrong drafts, each a row whose state is kept and put back).
// As BenchmarkSpeculative, each iteration generates once without and once
// with speculation, alternately, and times first token to last; the two
// outputs must be equal.
func BenchmarkHybridSpeculative(b *testing.B) {
	const gen, k = 128, 6
	for _, w := range []struct {
		name        string
		tied, fixed bool
	}{{"repeat", true, false}, {"chaotic", false, false}, {"chaotic-fixed", false, true}} {
		b.Run(w.name, func(b *testing.B) {
			spec := benchHybridSpec(w.tied)
			p := hybridEditPrompts(8, spec.Vocab)[7]
			mk := func(on bool) *Engine {
				cfg := Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1, MaxBatchTokens: 256}
				if on {
					cfg.Speculate = SpecConfig{Method: "ngram", K: k, MinNGram: 1, Fixed: w.fixed, LogitRows: 1 + k}
				}
				return newEngineOn(b, loadBenchHybrid(b, spec, 2, 1+k), cfg)
			}
			engines := [2]*Engine{mk(false), mk(true)}
			var dur [2]time.Duration
			var toks [2]int
			var out [2][]int32
			for b.Loop() {
				for i, e := range engines {
					s := submit(b, e, Request{Prompt: p, MaxTokens: gen})
					first := <-s.Tokens()
					out[i] = append(out[i][:0], first.ID)
					start := time.Now()
					for t := range s.Tokens() {
						out[i] = append(out[i], t.ID)
					}
					dur[i] += time.Since(start)
					toks[i] += len(out[i]) - 1
				}
				if !slices.Equal(out[0], out[1]) { // greedy: speculation changes nothing
					b.Fatalf("with speculation %v, without %v", out[1], out[0])
				}
			}
			b.Logf("output %v", out[0])
			plain, sp := float64(toks[0])/dur[0].Seconds(), float64(toks[1])/dur[1].Seconds()
			b.ReportMetric(plain, "plain-tok/s")
			b.ReportMetric(sp, "spec-tok/s")
			b.ReportMetric(sp/plain, "speedup")
			st := engines[1].Stats()
			if st.SpecDraftTokens > 0 {
				b.ReportMetric(float64(st.SpecAcceptedTokens)/float64(st.SpecDraftTokens), "accept-rate")
			}
			b.ReportMetric(float64(st.SpecDraftTokens)/float64(max(toks[1], 1)), "draft-rows/tok")
		})
	}
}

// BenchmarkHybridSpecStep: on benchHybridSpec at 2 threads, one sequence's
// decode step of 1+k rows (k = 6) four ways, taking turns: as drafts
// the DeltaNet layers keep what a rollback needs for, then rolled back to
// the verified row (keep: one row replayed) and to k−1 kept drafts (keep5:
// k rows replayed, the most), the same rows without drafts (plain), and a
// one-row step (t1): keep/plain is what speculation on recurrent state
// adds, and (1+k)·t1 over the kept step is the most a step whose every
// draft is accepted can gain.
func BenchmarkHybridSpecStep(b *testing.B) {
	const k, ctx, bs = 6, 120, 16
	m := loadBenchHybrid(b, benchHybridSpec(false), 2, 1+k)
	table := make([]int32, (ctx+k+1+bs-1)/bs)
	for i := range table {
		table[i] = int32(i)
	}
	batch := func(start, n, drafts int) *kernels.Batch {
		kb := &kernels.Batch{Seqs: []kernels.SeqRows{{End: n, ContextLen: start + n, Prompt: ctx, Blocks: table, Drafts: drafts}}}
		for i := range n {
			pos := int32(start + i)
			kb.Tokens = append(kb.Tokens, int32(3+(37*(start+i))%290))
			kb.Positions = append(kb.Positions, pos)
			kb.Slots = append(kb.Slots, pos)
			if start >= ctx {
				kb.LogitRows = append(kb.LogitRows, int32(i))
			}
		}
		if start < ctx {
			kb.LogitRows = []int32{int32(n - 1)}
		}
		return kb
	}
	if _, err := m.Forward(batch(0, ctx, 0)); err != nil { // the context the decode rows attend to
		b.Fatal(err)
	}
	kept, plain, one := batch(ctx, 1+k, k), batch(ctx, 1+k, 0), batch(ctx, 1, 0)
	var dur [4]time.Duration
	for b.Loop() {
		for i, kb := range []*kernels.Batch{kept, kept, plain, one} {
			start := time.Now()
			if _, err := m.Forward(kb); err != nil {
				b.Fatal(err)
			}
			if i < 2 { // to the verified row, and to the last draft but one (the longest replay)
				if err := m.RollBackState(0, i*(k-1)); err != nil {
					b.Fatal(err)
				}
			}
			dur[i] += time.Since(start)
		}
	}
	b.ReportMetric(dur[0].Seconds()*1e3/float64(b.N), "ms/kept-step")
	b.ReportMetric(dur[2].Seconds()*1e3/float64(b.N), "ms/plain-step")
	b.ReportMetric(dur[3].Seconds()*1e3/float64(b.N), "ms/1-row-step")
	b.ReportMetric(float64(dur[0])/float64(dur[2]), "keep/plain")
	b.ReportMetric(float64(dur[1])/float64(dur[2]), "keep5/plain")
	b.ReportMetric(float64(1+k)*float64(dur[3])/float64(dur[0]), "max-gain")
}
