package models

import (
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// BenchmarkTinyNewest runs llama-bench's pp128 and tg64 on one thread on
// each of TestTinyNewest's models and on TestTinyLlamaCpp's llama-q8_0 (the
// baseline an existing architecture sets), reporting tokens per CPU-second
// beside tokens/s: compare with `llama-bench -t 1 -p 128 -n 64` of v0.5.0
// on the files `go test -run TestTinyNewest -tiny-out DIR` writes, under
// time(1) for its CPU seconds.
func BenchmarkTinyNewest(b *testing.B) {
	type model struct {
		name  string
		spec  modeltest.Spec
		dtype kernels.DType
	}
	ms := []model{{"llama-q8_0", modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 21}, kernels.Q8_0}}
	for _, m := range tinyNewestModels {
		ms = append(ms, model{m.name, m.spec, m.dtype})
	}
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32((i*37 + 11) % 300)
	}
	for _, tm := range ms {
		path := filepath.Join(b.TempDir(), tm.name+".gguf")
		if err := modeltest.WriteGGUF(path, tm.spec, tm.dtype); err != nil {
			b.Fatal(err)
		}
		src, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		be := cpu.New(1)
		m, err := Load(src, be, Options{MaxBatchTokens: 128, MaxSeqs: 1, BlockSize: 16, KVBlocks: 16, ContextLen: 256})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tm.name+"/pp128", func(b *testing.B) {
			runs, cpu0 := 0, processCPU()
			for b.Loop() {
				newSoloRunner(m).feed(b, prompt)
				runs++
			}
			reportTiny(b, 128*runs, cpu0)
		})
		b.Run(tm.name+"/tg64", func(b *testing.B) {
			runs, cpu0 := 0, processCPU()
			for b.Loop() {
				r, tok := newSoloRunner(m), int32(1)
				for range 64 {
					tok = argmax(r.feed(b, []int32{tok}))
				}
				runs++
			}
			reportTiny(b, 64*runs, cpu0)
		})
		be.Close()
		src.Close()
	}
}

func reportTiny(b *testing.B, tokens int, cpu0 float64) {
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
	if c := processCPU() - cpu0; c > 0 {
		b.ReportMetric(float64(tokens)/c, "tokens/cpu-s")
	}
}
