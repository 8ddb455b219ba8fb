//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// gptossKernels are the kernels gpt-oss adds; the test names what is missing
// rather than failing deep in a load.
var gptossKernels = []string{"sink_attention", "oai_swiglu", "get_rows_mxfp4", "gemv_mxfp4_1", "gemv_mxfp4_2",
	"gemv_mxfp4_4", "gemv_mxfp4_8", "gemv_glu_mxfp4_1", "skinny16_mxfp4", "skinny32_mxfp4", "skinny64_mxfp4", "mma_mxfp4"}

// TestGetRowsMXFP4BitExact decodes MXFP4 rows of random bytes, every
// exponent among them, on the device (get_rows_mxfp4, dequant16 as the
// matmuls use it) and wants the CPU's decode bit for bit.
func TestGetRowsMXFP4BitExact(t *testing.T) {
	g, err := New(Options{})
	must(t, err)
	t.Cleanup(func() { g.Close() })
	if !g.drv.has("get_rows_mxfp4") {
		t.Fatal("kernel get_rows_mxfp4 is not loaded")
	}
	const rows, cols = 16, 512
	rowBytes := kernels.MXFP4.RowBytes(cols)
	data := make([]byte, rows*rowBytes)
	r := rand.New(rand.NewPCG(11, 12))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for blk := range rows * cols / 32 {
		data[blk*quant.MXFP4BlockBytes] = byte(blk) // 256 blocks: each exponent once
	}
	w, err := g.Upload(kernels.HostTensor{Name: "w", DType: kernels.MXFP4, Shape: []int{rows, cols}, Data: data})
	must(t, err)
	pick := []int32{15, 0, 7, 7, 3, 12}
	dst, err := g.Alloc(len(pick), cols)
	must(t, err)
	must(t, g.GetRows(dst, w, pick))
	got := make([]float32, len(pick)*cols)
	must(t, g.Read(dst, got))
	want := make([]float32, cols)
	for i, row := range pick {
		must(t, quant.Dequantize(kernels.MXFP4, data[int(row)*rowBytes:(int(row)+1)*rowBytes], want))
		for c := range cols {
			if a, b := math.Float32bits(got[i*cols+c]), math.Float32bits(want[c]); a != b {
				t.Fatalf("row %d element %d: device %#08x (%g), CPU %#08x (%g)", row, c, a, got[i*cols+c], b, want[c])
			}
		}
	}
}

// TestGPTOSSMatchesCPU runs the tiny gpt-oss models of the llama.cpp goldens
// (models' tiny_newest_test.go: window layers of 5 with sinks, biases,
// YaRN ×4 from 16 tokens, 4 experts) on both backends: F32 with top-2
// routing, and Q8_0 with MXFP4 experts, every expert taking every row (as
// there: 8-bit activations flip near-tied top-2 routes); and the same two
// at gpt-oss's head size, 64 (two heads over one KV head), whose attention
// runs on paged_prefill_sink and paged_decode_sink where the others' (16)
// runs on sink_attention. Two sequences are prefilled together (48 and 24
// tokens: with every expert taking every row the MXFP4 experts see 72 rows,
// the tile kernels' size), then both decode 10 steps together (two-row
// GEMVs) and the first 4 alone (batch-1 GEMVs), teacher-forced with the
// CPU's greedy choice. Every logit row is bounded as the other models'
// emulator checks bound theirs, and CUDA's greedy choice must be the CPU's
// wherever the CPU's lead exceeds 0.05.
func TestGPTOSSMatchesCPU(t *testing.T) {
	base := modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, GPTOSS: true,
		Window: 5, Experts: 4, RopeTheta: 150000, YaRN: &modeltest.YaRN{Factor: 4, OriginalContext: 16}}
	f32, mx, wide := base, base, base
	f32.Seed, f32.ExpertsUsed = 49, 2
	mx.Seed, mx.ExpertsUsed, mx.ExpertsMXFP4 = 50, 4, true
	// gpt-oss's head size, 64: its attention runs on the paged sink kernels
	wide.Seed, wide.Hidden, wide.Heads, wide.KVHeads, wide.ExpertsUsed, wide.ExpertsMXFP4 = 51, 128, 2, 1, 4, true
	wideF32 := wide
	wideF32.Seed, wideF32.ExpertsUsed, wideF32.ExpertsMXFP4 = 52, 2, false
	for _, tc := range []struct {
		name  string
		spec  modeltest.Spec
		dt    kernels.DType
		bound float64
	}{
		{"f32", f32, kernels.F32, 1e-4},
		// the quantized GEMVs' activations differ from the CPU's (TestWindowKVMatchesCPU's bound)
		{"mxfp4", mx, kernels.Q8_0, 5e-2},
		{"mxfp4-hd64", wide, kernels.Q8_0, 5e-2},
		{"f32-hd64", wideF32, kernels.F32, 1e-3}, // paged_prefill rounds q·scale and P to F16 (attention.cu)
	} {
		t.Run(tc.name, func(t *testing.T) { testGPTOSSMatchesCPU(t, tc.spec, tc.dt, tc.bound) })
	}
}

func testGPTOSSMatchesCPU(t *testing.T, spec modeltest.Spec, dt kernels.DType, bound float64) {
	path := filepath.Join(t.TempDir(), "oss.gguf")
	must(t, modeltest.WriteGGUF(path, spec, dt))
	src, err := models.Open(path)
	must(t, err)
	t.Cleanup(func() { src.Close() })
	const bs = 4
	opts := models.Options{MaxBatchTokens: 80, MaxSeqs: 2, BlockSize: bs, KVBlocks: 40}
	cb := cpu.New(2)
	t.Cleanup(func() { cb.Close() })
	mc, err := models.Load(src, cb, opts)
	must(t, err)
	g, err := New(Options{})
	must(t, err)
	t.Cleanup(func() { g.Close() })
	for _, k := range gptossKernels {
		if !g.drv.has(k) {
			t.Fatalf("kernel %s is not loaded (gptoss.cu and the MXFP4 instances of matmul.cu and elementwise.cu)", k)
		}
	}
	mg, err := models.Load(src, g, opts)
	must(t, err)

	r := rand.New(rand.NewPCG(13, 14))
	type seq struct {
		toks   []int32
		blocks []int32
		done   int // positions in the cache
	}
	seqs := []*seq{{blocks: make([]int32, 20)}, {blocks: make([]int32, 20)}}
	for i := range 20 {
		seqs[0].blocks[i], seqs[1].blocks[i] = int32(2*i+1), int32(2*i) // interleaved tables
	}
	for i, n := range []int{48, 24} {
		for range n {
			seqs[i].toks = append(seqs[i].toks, int32(r.IntN(spec.Vocab)))
		}
	}
	worst, steps, agree := 0.0, 0, 0
	for step := range 15 {
		live := seqs
		if step >= 11 {
			live = seqs[:1]
		}
		b := &kernels.Batch{}
		for _, s := range live {
			first := len(b.Tokens)
			for p := s.done; p < len(s.toks); p++ {
				b.Tokens = append(b.Tokens, s.toks[p])
				b.Positions = append(b.Positions, int32(p))
				b.Slots = append(b.Slots, s.blocks[p/bs]*bs+int32(p%bs))
			}
			b.Seqs = append(b.Seqs, kernels.SeqRows{Start: first, End: len(b.Tokens), ContextLen: len(s.toks), Prompt: len(s.toks),
				Blocks: s.blocks[:(len(s.toks)+bs-1)/bs]})
			b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
		}
		lc, err := mc.Forward(b)
		must(t, err)
		lc = append([]float32(nil), lc...)
		lg, err := mg.Forward(b)
		must(t, err)
		for i, s := range live {
			want, got := lc[i*spec.Vocab:(i+1)*spec.Vocab], lg[i*spec.Vocab:(i+1)*spec.Vocab]
			worst = math.Max(worst, relErr(got, want))
			best, lead := argmaxLead(want)
			gbest, _ := argmaxLead(got)
			steps++
			if gbest == best {
				agree++
			} else if lead > 0.05 {
				t.Errorf("step %d, sequence %d at %d: greedy %d on CUDA, %d on CPU (CPU's lead %.3f)", step, i, len(s.toks), gbest, best, lead)
			}
			s.done = len(s.toks)
			s.toks = append(s.toks, int32(best))
		}
	}
	t.Logf("worst row ‖cuda−cpu‖/‖cpu‖ %.3g (bound %.3g); greedy choices equal %d of %d", worst, bound, agree, steps)
	if !(worst <= bound) {
		t.Errorf("worst row ‖cuda−cpu‖/‖cpu‖ %.3g exceeds %.3g", worst, bound)
	}
}

// argmaxLead is the largest logit's index and its lead over the next.
func argmaxLead(v []float32) (int, float32) {
	best, second := 0, -1
	for i, x := range v {
		if x > v[best] {
			best, second = i, best
		} else if i != best && (second < 0 || x > v[second]) {
			second = i
		}
	}
	return best, v[best] - v[second]
}

// TestSinkAttentionMatchesCPU checks both of SinkAttention's paths against
// the CPU at gpt-oss's head size (64, eight query heads over two KV heads
// here), with one sink far above every score (most of the head's weight
// goes to it) and one far below: prefill chunks of 600, 300, 70 and 30 rows
// (paged_prefill_sink_64), then decode steps (paged_decode_sink_64) of all four
// sequences together (the shortest in one partition, the sink added where
// it is written; the others' partitions merged with the sink) and of the
// longest alone (split-K), over the whole context and over a window of 128.
func TestSinkAttentionMatchesCPU(t *testing.T) {
	p := newPair(t)
	const heads, kvHeads, hd, blocks, bs = 8, 2, 64, 96, 16
	cfg := kernels.KVConfig{Layers: 1, Blocks: blocks, BlockSize: bs, KVHeads: kvHeads, HeadDim: hd}
	kg, err := p.gpu.NewKVStore(cfg)
	must(t, err)
	kc, err := p.cpu.NewKVStore(cfg)
	must(t, err)
	fills := []int{600, 300, 70, 30}
	perm := p.rand.Perm(blocks)
	tables := make([][]int32, len(fills))
	for i, f := range fills {
		for range ceilDiv(f+50, bs) {
			tables[i] = append(tables[i], int32(perm[0]))
			perm = perm[1:]
		}
	}
	sv := p.randn(heads, 1)
	sv[1], sv[6] = 12, -30
	sinks := p.upload(kernels.F32, sv, heads)
	kvCols, qCols := kvHeads*hd, heads*hd
	scale := float32(1 / math.Sqrt(hd))
	run := func(what string, specs []seqSpec, window int, wantFn string) {
		t.Helper()
		b := buildBatch(specs, tables[:len(specs)], bs)
		n := len(b.Tokens)
		q := p.scratch(p.randn(n*qCols, 1), n, qCols)
		k := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		v := p.scratch(p.randn(n*kvCols, 1), n, kvCols)
		out := p.scratch(nil, n, qCols)
		must(t, p.gpu.SinkAttention(out.g, q.g, k.g, v.g, kg, 0, b, scale, window, sinks.g),
			p.cpu.SinkAttention(out.c, q.c, k.c, v.c, kc, 0, b, scale, window, sinks.c))
		if l := p.gpu.step.launches[len(p.gpu.step.launches)-1]; l.fn != wantFn {
			t.Errorf("%s: launched %s, want %s", what, l.fn, wantFn)
		}
		checkRows(t, p, what, out, n, qCols, 2e-3)
	}
	run("prefill", []seqSpec{{0, 600}, {0, 300}, {0, 70}, {0, 30}}, 0, "paged_prefill_sink_64")
	for _, window := range []int{0, 128} {
		for step := range 2 {
			specs := []seqSpec{{600 + step, 601 + step}, {300 + step, 301 + step}, {70 + step, 71 + step}, {30 + step, 31 + step}}
			run(fmt.Sprintf("window %d, decode of 4 at %d", window, 601+step), specs, window, "paged_decode_sink_64")
		}
		run(fmt.Sprintf("window %d, batch-1 decode", window), []seqSpec{{602, 603}}, window, "paged_decode_sink_64")
		// a chunk of 20 more rows of the second sequence: within a window
		// each row past it is a one-row sequence (decode), whole it is one
		// prefill item
		fn := "paged_prefill_sink_64"
		if window > 0 {
			fn = "paged_decode_sink_64"
		}
		run(fmt.Sprintf("window %d, chunk of 20", window), []seqSpec{{0, 0}, {302 + 20*window/128, 322 + 20*window/128}}, window, fn)
	}
	if splits := p.gpu.decodeSplits(1, kvHeads); splits < 2 {
		t.Errorf("a batch-1 decode ran %d partitions a KV head: no split-K merge was checked", splits)
	}
}
