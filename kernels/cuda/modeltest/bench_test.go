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

// TestDecodeThroughput times decode of a random Llama-3-8B-shaped model
// (SLUICE_CUDA_BENCH_DTYPE weights, default BF16: 16 GB, generated here) at
// each batch size of
// SLUICE_CUDA_BENCH_BATCHES (default "1,64,256"): every sequence is prefilled
// with a SLUICE_CUDA_BENCH_PROMPT-token prompt (default 128), then
// SLUICE_CUDA_BENCH_STEPS decode steps (default 32) are timed, each a full
// forward pass whose tokens are sampled (greedy) as the engine's step does:
// on the device, only the ids read back, or with SLUICE_DEVICE_SAMPLE=0
// every sequence's logits read back for the host.
// It prints a Markdown table, also written to SLUICE_CUDA_BENCH_OUT when set
// (rewritten after every batch size, so a run cut short keeps its rows).
// SLUICE_CUDA_BENCH_BW, the device's measured copy bandwidth in GB/s, adds
// each row's fraction of the bandwidth floor (weight bytes ÷ bandwidth).
// Each batch size is timed with plain launches and with every step a
// replayed CUDA graph (SLUICE_CUDA_BENCH_GRAPHS=0 skips the latter).
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
	dt := kernels.BF16
	if name := os.Getenv("SLUICE_CUDA_BENCH_DTYPE"); name != "" {
		var ok bool
		if dt, ok = benchTypes[name]; !ok {
			t.Fatalf("SLUICE_CUDA_BENCH_DTYPE=%s: want one of BF16, F16, Q8_0, Q4_K, Q6_K, Q4_1", name)
		}
	}
	bw, _ := strconv.ParseFloat(os.Getenv("SLUICE_CUDA_BENCH_BW"), 64)
	cfg := llama3_8B()
	if os.Getenv("SLUICE_CUDA_BENCH_SHAPE") == "test" {
		cfg = testShape()
	}
	const bs = 16
	perSeq := (prompt+2*(steps+2)+bs-1)/bs + 1 // decode runs twice: without and with graphs
	opts := models.Options{MaxBatchTokens: 2048, MaxSeqs: maxB, BlockSize: bs, KVBlocks: maxB * perSeq, ContextLen: 4096}
	t0 := time.Now()
	be := newCUDA(t)
	src := newRandomSource(cfg, dt, true)
	m, err := models.Load(src, be, opts)
	if err != nil {
		t.Fatal(err)
	}
	src.Close()
	load := time.Since(t0)
	weightBytes := weightBytesPerToken(cfg, dt)
	var out strings.Builder
	fmt.Fprintf(&out, "Decode, random %v model of %d layers × %d hidden (Llama-3-8B: 32 × 4096) on %s (load %.1fs), prompt %d, %d timed steps; %.2f GB of weights per step",
		dt, cfg.Layers, cfg.Hidden, be.Device(), load.Seconds(), prompt, steps, weightBytes/1e9)
	if bw > 0 {
		fmt.Fprintf(&out, ", floor %.0f tokens/s at batch 1 (%.0f GB/s copy bandwidth)", bw*1e9/weightBytes, bw)
	}
	// the run compares GEMM paths (scripts/device/run.sh sets SLUICE_CUBLAS)
	fmt.Fprintf(&out, "; GEMM path: %s", be.GEMMPath())
	ds := m.DeviceSampler()
	if ds != nil {
		fmt.Fprintf(&out, "; sampled on the device (token ids read back)")
	} else {
		fmt.Fprintf(&out, "; sampled on the host (SLUICE_DEVICE_SAMPLE=0: every logits row read back)")
	}
	params, ids := make([]kernels.SampleParams, maxB), make([]int32, maxB) // greedy
	decode := func(b *kernels.Batch) error {
		if ds == nil {
			_, err := m.Forward(b)
			return err
		}
		logits, err := m.ForwardDevice(b)
		if err != nil {
			return err
		}
		return ds.SampleRows(logits, params[:len(b.LogitRows)], ids[:len(b.LogitRows)])
	}
	fmt.Fprintf(&out, "\n\n| batch | prefill tok/s | ms/step | decode tok/s | weight GB/s (bytes/step ÷ time) | of the floor | launches/step |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	flush := func() {
		if path := os.Getenv("SLUICE_CUDA_BENCH_OUT"); path != "" {
			if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	flush()
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
		// decode: plain launches, then (unless SLUICE_CUDA_BENCH_GRAPHS=0)
		// each step as a replayed CUDA graph; two warm-up steps each
		for _, graphs := range []bool{false, true} {
			if graphs && os.Getenv("SLUICE_CUDA_BENCH_GRAPHS") == "0" {
				continue
			}
			if err := be.UseGraphs(graphs); err != nil {
				t.Fatal(err)
			}
			var elapsed time.Duration
			var launches int64
			for s := range steps + 2 {
				if s == 2 {
					launches = be.Launches()
				}
				ts := time.Now()
				if err := decode(step(seqs, one, bs, &next)); err != nil {
					t.Fatalf("decode (graphs %v): %v", graphs, err)
				}
				if s >= 2 {
					elapsed += time.Since(ts)
				}
			}
			ms := elapsed.Seconds() * 1e3 / float64(steps)
			gbs := weightBytes / (ms * 1e-3) / 1e9
			floor := "–"
			if bw > 0 {
				floor = fmt.Sprintf("%.0f%%", 100*gbs/bw)
			}
			label := fmt.Sprint(nb)
			if graphs {
				label += " (graphs)"
			}
			fmt.Fprintf(&out, "| %s | %.0f | %.2f | %.1f | %.0f | %s | %d |\n", label, float64(nb*prompt)/prefill.Seconds(), ms,
				float64(nb)*1e3/ms, gbs, floor, (be.Launches()-launches)/int64(steps))
			flush()
		}
		if err := be.UseGraphs(false); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Print(out.String())
}

var benchTypes = map[string]kernels.DType{"BF16": kernels.BF16, "F16": kernels.F16, "Q8_0": kernels.Q8_0,
	"Q4_K": kernels.Q4_K, "Q6_K": kernels.Q6_K, "Q4_1": kernels.Q4_1}

// weightBytesPerToken is what one decode step must read: every matrix (the
// output head included) once, plus one embedding row, in dt's block layout.
func weightBytesPerToken(c models.Config, dt kernels.DType) float64 {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	rows := func(out, in int) int { return out * dt.RowBytes(in) }
	layer := rows(q+2*kv, c.Hidden) + rows(c.Hidden, q) + 2*rows(c.FFN, c.Hidden) + rows(c.Hidden, c.FFN)
	return float64(c.Layers*layer + rows(c.Vocab, c.Hidden) + dt.RowBytes(c.Hidden))
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
