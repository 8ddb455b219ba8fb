package models

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

// BenchmarkQwen35 runs llama-bench's pp128 and tg64 on one thread over a
// small hybrid model of Qwen3.5's layer pattern (3 DeltaNet layers to 1 of
// full attention, partial rotary, 16 value heads of 128 tiled over 16 key
// heads as the 0.8B model has them) at a reduced width, Q8_0, reporting
// tokens per CPU-second beside tokens per second.
func BenchmarkQwen35(b *testing.B) {
	spec := modeltest.Qwen35Spec{Layers: 8, Hidden: 256, FFN: 768, Vocab: 2048, Heads: 4, KVHeads: 1, HeadDim: 256,
		KHeads: 16, VHeads: 16, StateSize: 128, Seed: 5}
	m := loadQwen35(b, spec, kernels.Q8_0, Options{MaxBatchTokens: 128, MaxSeqs: 1, KVBlocks: 16})
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(3 + i*37%2000)
	}
	report := func(b *testing.B, tokens int, cpu0 float64) {
		b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		if cpu := processCPU() - cpu0; cpu > 0 {
			b.ReportMetric(float64(tokens)/cpu, "tokens/CPU-s")
		}
	}
	b.Run("pp128", func(b *testing.B) {
		b.ReportAllocs()
		runs, cpu0 := 0, processCPU()
		for b.Loop() {
			runQwen35Last(b, m, prompt, 0, len(prompt), len(prompt))
			runs++
		}
		report(b, 128*runs, cpu0)
	})
	b.Run("tg64", func(b *testing.B) {
		b.ReportAllocs()
		runs, cpu0 := 0, processCPU()
		for b.Loop() {
			runs++
			tok := int32(1)
			for p := range 64 {
				tok = argmax(runQwen35Last(b, m, []int32{tok}, p, 1, 1))
			}
		}
		report(b, 64*runs, cpu0)
	})
}

// runQwen35Last feeds toks[0:n] at positions from start in slot 0, of a
// sequence whose prompt is prompt tokens long, and returns the last row's
// logits.
func runQwen35Last(tb testing.TB, m *Qwen35, toks []int32, start, n, prompt int) []float32 {
	all := make([]int32, start+n)
	copy(all[start:], toks[:n])
	b := q35Batch(m.opts.BlockSize, q35Seq{toks: all, start: start, n: n, prompt: prompt})
	b.LogitRows = b.LogitRows[len(b.LogitRows)-1:]
	logits, err := m.Forward(b)
	if err != nil {
		tb.Fatal(fmt.Errorf("forward: %w", err))
	}
	return logits
}
