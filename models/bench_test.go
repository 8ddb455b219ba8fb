package models

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluicehq/sluice/kernels/cpu"
)

const smolLM2Path = "SmolLM2-135M-Instruct.Q4_1.gguf" // make model puts it beside this package

func loadDefault(tb testing.TB, threads int, opts Options) *Llama {
	tb.Helper()
	return loadModel(tb, smolLM2Path, "make model", threads, opts)
}

// loadModel loads path on a CPU backend, or skips the test when the file is
// absent (fetch names the make target that brings it).
func loadModel(tb testing.TB, path, fetch string, threads int, opts Options) *Llama {
	tb.Helper()
	return loadModelWith(tb, path, fetch, threads, opts, nil)
}

// loadModelWith is loadModel with setup (when not nil) run on the backend
// before the weights are uploaded.
func loadModelWith(tb testing.TB, path, fetch string, threads int, opts Options, setup func(*cpu.Backend)) *Llama {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		tb.Skipf("model absent (%v): run `%s`", err, fetch)
	}
	src, err := Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { src.Close() })
	be := cpu.New(threads)
	tb.Cleanup(func() { be.Close() })
	if setup != nil {
		setup(be)
	}
	m, err := Load(src, be, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkSmolLM2 measures one stream on the default model the way
// llama-bench does: pp = a 128-token prompt in one pass, tg = 64 decoded tokens
// one at a time. Compare with scripts/llamacpp/bench.sh on the same machine.
func BenchmarkSmolLM2(b *testing.B) {
	for _, threads := range []int{1, 2} {
		benchSolo(b, loadDefault(b, threads, Options{MaxBatchTokens: 128, MaxSeqs: 1, KVBlocks: 64}), threads)
	}
}

// benchSolo runs llama-bench's pp128 and tg64 on m.
func benchSolo(b *testing.B, m *Llama, threads int) {
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(1000 + i*37%20000)
	}
	b.Run(fmt.Sprintf("pp128/threads=%d", threads), func(b *testing.B) {
		b.ReportAllocs()
		runs := 0
		for b.Loop() {
			newSoloRunner(m).feed(b, prompt)
			runs++
		}
		b.ReportMetric(float64(128*runs)/b.Elapsed().Seconds(), "tokens/s")
	})
	b.Run(fmt.Sprintf("tg64/threads=%d", threads), func(b *testing.B) {
		b.ReportAllocs()
		runs := 0
		for b.Loop() {
			runs++
			r := newSoloRunner(m)
			tok := int32(1)
			for range 64 {
				tok = argmax(r.feed(b, []int32{tok}))
			}
		}
		b.ReportMetric(float64(64*runs)/b.Elapsed().Seconds(), "tokens/s")
	})
}
