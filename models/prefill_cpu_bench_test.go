package models

import (
	"fmt"
	"testing"
)

// BenchmarkPrefillWarm is pp128 (a 128-token prompt in one pass, 2 threads)
// on the default model and Gemma 3 270M, after one unmeasured pass: what a
// server's prompts cost once its weights are warm (issue 26's AMX weight
// cache is filled by the first prompt, and benchSolo's first iteration
// would count that fill). tokens/cpu-s divides by the process's CPU time,
// the steadier figure on a shared machine.
//
//	go test ./models -run '^$' -bench PrefillWarm -benchtime 10x
func BenchmarkPrefillWarm(b *testing.B) {
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(1000 + i*37%20000)
	}
	opts := Options{MaxBatchTokens: 128, MaxSeqs: 1, KVBlocks: 64}
	for _, tc := range []struct {
		name string
		load func() *Llama
	}{
		{"SmolLM2", func() *Llama { return loadDefault(b, 2, opts) }},
		{"Gemma3", func() *Llama { return loadGemma3(b, 2, opts) }},
	} {
		b.Run(fmt.Sprintf("%s/pp128/threads=2", tc.name), func(b *testing.B) {
			m := tc.load()
			newSoloRunner(m).feed(b, prompt)
			cpu0 := processCPU()
			for b.Loop() {
				newSoloRunner(m).feed(b, prompt)
			}
			b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tokens/s")
			if cpu := processCPU() - cpu0; cpu > 0 {
				b.ReportMetric(float64(128*b.N)/cpu, "tokens/cpu-s")
			}
		})
	}
}
