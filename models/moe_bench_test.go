package models

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// multiRunner drives several sequences through a model without the engine,
// one batch per step: stream s owns the KV blocks [s·per, (s+1)·per), and a
// step carries each stream's rows one after another. The MoE tests use it to
// run rows of different sequences through one routing call.
type multiRunner struct {
	m      *Llama
	pos    []int // next position of each stream
	blocks [][]int32
}

func newMultiRunner(m *Llama, streams, firstBlock, maxLen int) *multiRunner {
	bs := m.opts.BlockSize
	per := (maxLen + bs - 1) / bs
	r := &multiRunner{m: m, pos: make([]int, streams), blocks: make([][]int32, streams)}
	for s := range r.blocks {
		for i := range per {
			r.blocks[s] = append(r.blocks[s], int32(firstBlock+s*per+i))
		}
	}
	return r
}

// step feeds toks[s] to stream s (empty: the stream sits this step out) as
// one batch and returns the logits after each fed stream's last row, in
// stream order.
func (r *multiRunner) step(t testing.TB, toks [][]int32) []float32 {
	t.Helper()
	bs := int32(r.m.opts.BlockSize)
	b := &kernels.Batch{}
	for s, ts := range toks {
		if len(ts) == 0 {
			continue
		}
		start := len(b.Tokens)
		for _, tok := range ts {
			p := int32(r.pos[s])
			b.Tokens = append(b.Tokens, tok)
			b.Positions = append(b.Positions, p)
			b.Slots = append(b.Slots, r.blocks[s][p/bs]*bs+p%bs)
			r.pos[s]++
		}
		b.Seqs = append(b.Seqs, kernels.SeqRows{Start: start, End: len(b.Tokens), ContextLen: r.pos[s], Blocks: r.blocks[s]})
		b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
	}
	out, err := r.m.Forward(b)
	if err != nil {
		t.Fatalf("forward of %d rows: %v", len(b.Tokens), err)
	}
	return out
}

// moeBenchSpec is small enough to write in a second and large enough that
// reading expert weights dominates a decode step: 8 experts of 3×512×1024
// weights per layer (Q8_0: 13.4 MB a layer, 53 MB in all), of which one
// token's top 2 read a quarter. Attention and the 512-token head are about
// 5% of the bytes.
var moeBenchSpec = modeltest.Spec{Layers: 4, Hidden: 512, Heads: 8, KVHeads: 4, FFN: 1024, Vocab: 512, Seed: 41,
	Experts: 8, ExpertsUsed: 2, ExpertFFN: 1024, ContextLen: 128}

// BenchmarkMoEDecode is the mixture-of-experts batching target: one decode
// step of N sequences (one row each, contexts of 32–63 tokens) against one
// of a single sequence, on 1 and 2 backend threads, with every matrix in
// Q8_0 and in Q4_K (the router too, which llama.cpp's quantizer keeps in
// F32: here an 8×512 product a row and layer, 0.1% of its multiply-adds).
// Routing N rows in one MoEFFN call multiplies each
// expert's weights once against all the rows that chose it (≈4 of 16 per
// expert), so where reading weights is the cost 16 streams decode several
// times the tokens per second of one; where the per-row dot products are
// (weights resident in a large cache), the gain is what the multi-row
// kernels save (BENCHMARKS.md). Each stream feeds back its own greedy
// token, so routing changes from step to step as in serving.
//
// tokens/s is wall time; tokens/cpu-s (one thread only) is tokens per
// second of the process's CPU time, the figure a loaded machine disturbs
// least. With two threads the helper spins between operations, so its CPU
// time is not the work and only wall time is reported.
func BenchmarkMoEDecode(b *testing.B) {
	for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_K} {
		b.Run(dt.String(), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "moe.gguf")
			if err := modeltest.WriteGGUF(path, moeBenchSpec, dt); err != nil {
				b.Fatal(err)
			}
			src, err := Open(path)
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close()
			for _, threads := range []int{1, 2} {
				benchMoEDecode(b, src, threads)
			}
		})
	}
}

// benchMoEDecode runs BenchmarkMoEDecode's steps on a CPU backend of the
// given threads.
func benchMoEDecode(b *testing.B, src WeightSource, threads int) {
	const prefix, span = 32, 32
	be := cpu.New(threads)
	defer be.Close()
	const maxStreams, bs = 16, 16
	m, err := Load(src, be, Options{MaxBatchTokens: prefix * maxStreams, MaxSeqs: maxStreams, BlockSize: bs,
		KVBlocks: maxStreams * (prefix + span) / bs})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC() // the f32 weights modeltest drew are garbage now: collect them before the clock runs
	for _, streams := range []int{1, 16} {
		b.Run(fmt.Sprintf("threads=%d/streams=%d", threads, streams), func(b *testing.B) {
			r := newMultiRunner(m, streams, 0, prefix+span)
			prompts := make([][]int32, streams)
			for s := range prompts {
				for i := range prefix {
					prompts[s] = append(prompts[s], int32(3+(s*97+i*31)%(moeBenchSpec.Vocab-3)))
				}
			}
			logits := r.step(b, prompts)
			next := make([][]int32, streams)
			b.ReportAllocs()
			steps, cpu0 := 0, processCPU()
			for b.Loop() {
				for s := range next {
					next[s] = append(next[s][:0], argmax(logits[s*moeBenchSpec.Vocab:(s+1)*moeBenchSpec.Vocab]))
					if r.pos[s] == prefix+span {
						r.pos[s] = prefix // rewrite the decoded span: contexts stay 32–63 tokens
					}
				}
				logits = r.step(b, next)
				steps++
			}
			b.ReportMetric(float64(streams*steps)/b.Elapsed().Seconds(), "tokens/s")
			if used := processCPU() - cpu0; used > 0 && threads == 1 {
				// With one backend thread CPU time is the work, whatever the
				// neighbours take; with more it counts the helpers' spinning.
				b.ReportMetric(float64(streams*steps)/used, "tokens/cpu-s")
			}
		})
	}
}
