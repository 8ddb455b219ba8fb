//go:build cuda || cudaemu

package modeltest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models"
)

// TestDecodeThroughput times decode of a random Llama-3-8B-shaped BF16 model
// (16 GB of weights, generated here) at each batch size of
// SLUICE_CUDA_BENCH_BATCHES (default "1,64,256"): every sequence is prefilled
// with a SLUICE_CUDA_BENCH_PROMPT-token prompt (default 128), then
// SLUICE_CUDA_BENCH_STEPS decode steps (default 32) are timed, each a full
// Forward that reads back every sequence's logits, as the engine's step does.
// It prints a Markdown table, also written to SLUICE_CUDA_BENCH_OUT when set.
// Skipped unless SLUICE_CUDA_BENCH=1: it needs ~30 GB of GPU memory.
// SLUICE_CUDA_BENCH_SHAPE=test swaps in testShape() (a dry run of the
// benchmark itself, e.g. on the emulator).
func TestDecodeThroughput(t *testing.T) {
	if os.Getenv("SLUICE_CUDA_BENCH") != "1" {
		t.Skip("set SLUICE_CUDA_BENCH=1 to run the 8B decode benchmark")
	}
	batches := envInts(t, "SLUICE_CUDA_BENCH_BATCHES", "1,64,256")
	prompt := envInts(t, "SLUICE_CUDA_BENCH_PROMPT", "128")[0]
	steps := envInts(t, "SLUICE_CUDA_BENCH_STEPS", "32")[0]
	maxB := 0
	for _, b := range batches {
		maxB = max(maxB, b)
	}
	cfg := llama3_8B()
	if os.Getenv("SLUICE_CUDA_BENCH_SHAPE") == "test" {
		cfg = testShape()
	}
	const bs = 16
	perSeq := (prompt+steps+1+bs-1)/bs + 1
	opts := models.Options{MaxBatchTokens: 2048, MaxSeqs: maxB, BlockSize: bs, KVBlocks: maxB * perSeq, ContextLen: 4096}
	t0 := time.Now()
	be := newCUDA(t)
	src := newRandomSource(cfg, kernels.BF16, true)
	m, err := models.Load(src, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	load := time.Since(t0)
	weightBytes := bf16WeightBytesPerToken(cfg)
	var out strings.Builder
	fmt.Fprintf(&out, "Decode, random BF16 model of %d layers × %d hidden (Llama-3-8B: 32 × 4096) on %s (load %.1fs), prompt %d, %d timed steps\n\n",
		cfg.Layers, cfg.Hidden, be.Device(), load.Seconds(), prompt, steps)
	fmt.Fprintf(&out, "| batch | prefill tok/s | ms/step | decode tok/s | weight GB/s (bytes/step ÷ time) |\n|---:|---:|---:|---:|---:|\n")
	for _, nb := range batches {
		var next int32
		seqs := make([]*sequence, nb)
		for i := range seqs {
			seqs[i] = &sequence{}
		}
		// prefill: as many whole prompts per Forward as MaxBatchTokens holds
		per := max(1, opts.MaxBatchTokens/prompt)
		tp := time.Now()
		for i := 0; i < nb; i += per {
			group := seqs[i:min(nb, i+per)]
			toks := make([][]int32, len(group))
			for j := range toks {
				toks[j] = make([]int32, prompt)
				for k := range toks[j] {
					toks[j][k] = int32((i + j + 7*k) % cfg.Vocab)
				}
			}
			if _, err := m.Forward(step(group, toks, bs, &next)); err != nil {
				t.Fatalf("prefill: %v", err)
			}
		}
		prefill := time.Since(tp)
		one := make([][]int32, nb)
		for i := range one {
			one[i] = []int32{int32(i % cfg.Vocab)}
		}
		var elapsed time.Duration
		for s := range steps + 2 {
			ts := time.Now()
			if _, err := m.Forward(step(seqs, one, bs, &next)); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if s >= 2 { // two warm-up steps
				elapsed += time.Since(ts)
			}
		}
		ms := elapsed.Seconds() * 1e3 / float64(steps)
		fmt.Fprintf(&out, "| %d | %.0f | %.2f | %.1f | %.0f |\n", nb, float64(nb*prompt)/prefill.Seconds(), ms,
			float64(nb)*1e3/ms, weightBytes/(ms*1e-3)/1e9)
	}
	fmt.Print(out.String())
	if path := os.Getenv("SLUICE_CUDA_BENCH_OUT"); path != "" {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// bf16WeightBytesPerToken is what one decode step must read: every matrix
// (the output head included) once, plus one embedding row.
func bf16WeightBytesPerToken(c models.Config) float64 {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	layer := c.Hidden*(q+2*kv) + q*c.Hidden + 3*c.Hidden*c.FFN
	return 2 * float64(c.Layers*layer+c.Vocab*c.Hidden+c.Hidden)
}

func envInts(t *testing.T, key, def string) []int {
	t.Helper()
	s := os.Getenv(key)
	if s == "" {
		s = def
	}
	var v []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want positive integers", key, s)
		}
		v = append(v, n)
	}
	return v
}
