package models

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// Decode bandwidth (issue 26): one stream's decode step reads every layer's
// matrices and the output head once a token, so weight bytes per token
// times tokens/s is the read rate decode reaches. kernels/cpu's
// BenchmarkReadBandwidth measures what the machine reads over buffers of
// each model's per-token bytes (its sizes are this file's MB/token), the
// ceiling to divide by.

// decodeBWSpec is a Llama past this machine's L3 (480 MiB): 14 layers of
// 2048 wide with a 5632-wide FFN, 45 M weights a layer; in Q8_0 640 MiB
// read a token (the 512-token head adds 1 MiB). Written in ~30 s, using
// ~3.5 GB while it is (modeltest builds every f32 weight first).
var decodeBWSpec = modeltest.Spec{Layers: 14, Hidden: 2048, Heads: 16, KVHeads: 4, FFN: 5632, Vocab: 512, Seed: 26, ContextLen: 128}

// BenchmarkDecodeBandwidth: one stream decoding on 1 and 2 threads, on the
// default model (SmolLM2-135M Q4_1), Gemma 3 270M Q4_K_M and decodeBWSpec
// in Q8_0. Each op is one decode step (one token, a row kernel for every
// matrix: no row is a prompt row), positions cycling through 0–63 on the
// same KV blocks after one untimed cycle, so contexts are llama-bench tg64's.
// Metrics: MB/token (weightBytes) and GB/s = that × tokens/s; cpu-ms/token
// is the process's CPU time a token, every thread's spinning included (on
// one thread the figure to read when other processes share the cores,
// since it leaves out the time the thread waited for one). GB/s leaves
// out the F16 KV cache (32 positions on average: 0.7 MB a token for
// SmolLM2, 0.6 MB for Gemma 3, 0.9 MB for the synthetic model) and the
// activations, so it is a lower bound on what a step reads.
func BenchmarkDecodeBandwidth(b *testing.B) {
	// Written once, into the parent's directory: both thread counts load it.
	parent, synth := b, ""
	synthPath := func(b *testing.B) string {
		if synth == "" {
			p := filepath.Join(parent.TempDir(), "decode-bw-q8_0.gguf")
			if err := modeltest.WriteGGUF(p, decodeBWSpec, kernels.Q8_0); err != nil {
				b.Fatal(err)
			}
			runtime.GC() // the writer's f32 weights
			synth = p
		}
		return synth
	}
	opts := decodeBWOptions
	for _, model := range append(decodeBWModels(), bwModel{"synthetic-640MiB-Q8_0", func(b *testing.B, threads int) *Llama {
		return loadModel(b, synthPath(b), "", threads, opts)
	}}) {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", model.name, threads), func(b *testing.B) {
				m := model.load(b, threads)
				perToken := weightBytes(b, m)
				d := newDecodeLoop(m)
				for range decodeCycle { // the weights in whatever cache holds them
					d.step(b)
				}
				cpu0 := processCPU()
				for b.Loop() {
					d.step(b)
				}
				gbs := float64(perToken) * float64(b.N) / b.Elapsed().Seconds() / 1e9
				b.ReportMetric(float64(perToken)/1e6, "MB/token")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
				b.ReportMetric(gbs, "GB/s")
				if cpu := processCPU() - cpu0; cpu > 0 {
					b.ReportMetric(cpu*1e3/float64(b.N), "cpu-ms/token")
				}
			})
		}
	}
}

// decodeBWOptions sizes the bandwidth benchmarks' models: one sequence.
var decodeBWOptions = Options{MaxBatchTokens: 64, MaxSeqs: 1, KVBlocks: 8}

// bwModel is a model the bandwidth benchmarks decode, by name.
type bwModel struct {
	name string
	load func(b *testing.B, threads int) *Llama
}

// decodeBWModels are the real models both bandwidth benchmarks decode.
func decodeBWModels() []bwModel {
	return []bwModel{
		{"SmolLM2-135M-Q4_1", func(b *testing.B, threads int) *Llama { return loadDefault(b, threads, decodeBWOptions) }},
		{"Gemma3-270M-Q4_K_M", func(b *testing.B, threads int) *Llama { return loadGemma3(b, threads, decodeBWOptions) }},
	}
}

// decodeCycle is how many positions the decode loop runs before it starts
// again at 0 on the same blocks (llama-bench's tg64).
const decodeCycle = 64

// decodeLoop feeds one token a step, each the argmax of the last step's
// logits, with SeqRows.Prompt 0 so every row takes the row kernels a
// generated token takes (a prompt row would take the AMX tiles and their
// cache, another 2× the weights' bytes).
type decodeLoop struct {
	m      *Llama
	pos    int
	tok    int32
	blocks []int32
}

func newDecodeLoop(m *Llama) *decodeLoop {
	bs := m.opts.BlockSize
	d := &decodeLoop{m: m, tok: 1}
	for i := range (decodeCycle + bs - 1) / bs {
		d.blocks = append(d.blocks, int32(i))
	}
	return d
}

func (d *decodeLoop) step(tb testing.TB) {
	p := int32(d.pos)
	b := &kernels.Batch{
		Tokens: []int32{d.tok}, Positions: []int32{p}, Slots: []int32{p},
		Seqs:      []kernels.SeqRows{{Start: 0, End: 1, ContextLen: d.pos + 1, Blocks: d.blocks}},
		LogitRows: []int32{0},
	}
	out, err := d.m.Forward(b)
	if err != nil {
		tb.Fatalf("decode at position %d: %v", d.pos, err)
	}
	d.tok = argmax(out)
	d.pos = (d.pos + 1) % decodeCycle
}

// weightBytes is what one decode step of m reads of its weights: every
// tensor of every layer, the final norm and the output head whole, and one
// row of the token embedding (none more when the head is the embedding).
func weightBytes(tb testing.TB, m *Llama) int64 {
	tb.Helper()
	if m.cfg.Experts > 0 || m.gemma4 != nil || m.gptoss != nil {
		tb.Fatalf("%s: weightBytes counts dense Llama and Gemma 2/3 layers only", m.cfg.Arch)
	}
	var n int64
	for _, l := range m.layers {
		for _, t := range []kernels.Tensor{l.attnNorm, l.ffnNorm, l.wq, l.wk, l.wv, l.wo, l.bq, l.bk, l.bv,
			l.wGate, l.wUp, l.wDown, l.qNorm, l.kNorm, l.postAttnNorm, l.postFFNNorm} {
			n += tensorBytes(t)
		}
	}
	n += tensorBytes(m.outNorm) + tensorBytes(m.output)
	if m.output != m.tokEmbd {
		n += int64(m.tokEmbd.DType().RowBytes(m.cfg.Hidden))
	}
	return n
}

func tensorBytes(t kernels.Tensor) int64 {
	if t == nil {
		return 0
	}
	s := t.Shape()
	rows := int64(1)
	for _, d := range s[:len(s)-1] {
		rows *= int64(d)
	}
	return rows * int64(t.DType().RowBytes(s[len(s)-1]))
}

// BenchmarkDecodeBandwidthPaired is BenchmarkDecodeBandwidth with its
// ceiling measured in the same op: each op is one decode step and then one
// pass of the backend's Q8_0 one-row matmul (kernels/cpu's q8_0rows way of
// reading, on the same threads) over as many bytes of weights of its own,
// so both meet the same neighbours. On a VM whose read rate moves by half
// between seconds (session 6's Ice Lake: 11–19 GB/s on two threads in one
// hour) a ceiling measured in another run divides one moment by another.
// The pass also pushes the model out of the cache, so on a CPU whose L3
// holds the model this measures decode from memory, not from L3. Metrics:
// decode-GB/s and read-GB/s over each one's own time, and fraction (their
// ratio: the share of the read rate decode reaches).
func BenchmarkDecodeBandwidthPaired(b *testing.B) {
	for _, model := range decodeBWModels() {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", model.name, threads), func(b *testing.B) {
				m := model.load(b, threads)
				perToken := weightBytes(b, m)
				read := newReadPass(b, m.be, perToken)
				d := newDecodeLoop(m)
				for range decodeCycle {
					d.step(b)
					read.run(b)
				}
				var decodeTime, readTime time.Duration
				for b.Loop() {
					t0 := time.Now()
					d.step(b)
					t1 := time.Now()
					read.run(b)
					decodeTime += t1.Sub(t0)
					readTime += time.Since(t1)
				}
				decodeGBs := float64(perToken) * float64(b.N) / decodeTime.Seconds() / 1e9
				readGBs := float64(read.bytes) * float64(b.N) / readTime.Seconds() / 1e9
				b.ReportMetric(float64(perToken)/1e6, "MB/token")
				b.ReportMetric(decodeGBs, "decode-GB/s")
				b.ReportMetric(readGBs, "read-GB/s")
				b.ReportMetric(decodeGBs/readGBs, "fraction")
			})
		}
	}
}

// BenchmarkDecodeLayouts times decode on the default model with its Q4_1
// and Q8_0 matrices regrouped (kernels/cpu's x16pack.go) and in the file's
// layout (cpu.Backend.KeepFileLayout), the two alternated step by step in one
// process with a read pass after each, so both meet the same memory on a
// VM whose read rate moves between seconds. The grouped kernels round
// once a block where the file layout's round per partial sum, so a near
// tie can pick another token: the file layout's loop is fed the grouped
// one's tokens, so both decode the same text. Metrics: each layout's
// fraction of the read rate, and file-ns/grouped-ns, the step's speed-up.
func BenchmarkDecodeLayouts(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("SmolLM2-135M-Q4_1/threads=%d", threads), func(b *testing.B) {
			grouped := loadDefault(b, threads, decodeBWOptions)
			file := loadModelWith(b, smolLM2Path, "make model", threads, decodeBWOptions, (*cpu.Backend).KeepFileLayout)
			perToken := weightBytes(b, grouped)
			read := newReadPass(b, grouped.be, perToken)
			dg, df := newDecodeLoop(grouped), newDecodeLoop(file)
			for range decodeCycle {
				df.tok = dg.tok
				dg.step(b)
				df.step(b)
				read.run(b)
			}
			var tg, tf, tr time.Duration
			for b.Loop() {
				df.tok = dg.tok
				t0 := time.Now()
				dg.step(b)
				t1 := time.Now()
				read.run(b)
				t2 := time.Now()
				df.step(b)
				t3 := time.Now()
				read.run(b)
				tg += t1.Sub(t0)
				tf += t3.Sub(t2)
				tr += t2.Sub(t1) + time.Since(t3)
			}
			reportPaired(b, perToken, read, tr, "grouped", tg, "file", tf)
		})
	}
}

// BenchmarkDecodeHugePages times the default model at two threads with its
// weights on huge pages (kernels/cpu's weightarena.go, the default) and in
// ordinary Go heap memory (cpu.Backend.SetHugePages(false)), two loads of
// it in one process taking turns: tg64 (llama-bench's, one row a step, the
// row kernels) and a 128-token prompt in chunks of 16 and 64 rows (prompt
// rows: the tiled kernels where the CPU has AMX). Metrics: small-ns/huge-ns,
// the speed-up, and huge-tok/s.
func BenchmarkDecodeHugePages(b *testing.B) {
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(1000 + i*37%20000)
	}
	for _, chunk := range []int{1, 16, 64} {
		name := fmt.Sprintf("pp128-chunk%d", chunk)
		if chunk == 1 {
			name = "tg64"
		}
		b.Run("SmolLM2-135M-Q4_1/threads=2/"+name, func(b *testing.B) {
			opts := Options{MaxBatchTokens: chunk, MaxSeqs: 1, KVBlocks: 64} // feed's chunks
			huge := loadDefault(b, 2, opts)
			small := loadModelWith(b, smolLM2Path, "make model", 2, opts, func(be *cpu.Backend) { be.SetHugePages(false) })
			tokens := len(prompt)
			run := func(m *Llama) time.Duration {
				t0 := time.Now()
				if chunk == 1 {
					d := newDecodeLoop(m)
					for range decodeCycle {
						d.step(b)
					}
				} else {
					newSoloRunner(m).feed(b, prompt)
				}
				return time.Since(t0)
			}
			if chunk == 1 {
				tokens = decodeCycle
			}
			run(huge)
			run(small)
			var th, ts time.Duration
			for b.Loop() {
				th += run(huge)
				ts += run(small)
			}
			b.ReportMetric(ts.Seconds()/th.Seconds(), "speedup")
			b.ReportMetric(float64(tokens*b.N)/th.Seconds(), "huge-tok/s")
		})
	}
}

// BenchmarkDecodeReadAhead times decode at two threads with the helpers
// reading the next product's weights ahead (kernels/cpu's readahead.go) and
// without (cpu.Backend.SetReadAhead), the two alternated step by step on
// one model with a read pass after each, as BenchmarkDecodeLayouts does the
// layouts: the same memory, the same tokens. Metrics: each way's fraction
// of the read rate, and off-ns/on-ns, the step's speed-up.
func BenchmarkDecodeReadAhead(b *testing.B) {
	for _, model := range decodeBWModels() {
		b.Run(model.name+"/threads=2", func(b *testing.B) {
			m := model.load(b, 2)
			be := m.be.(*cpu.Backend)
			perToken := weightBytes(b, m)
			read := newReadPass(b, m.be, perToken)
			d := newDecodeLoop(m)
			var ton, toff, tr time.Duration
			step := func(on bool, t *time.Duration) {
				be.SetReadAhead(on)
				t0 := time.Now()
				d.step(b)
				t1 := time.Now()
				read.run(b)
				*t += t1.Sub(t0)
				tr += time.Since(t1)
			}
			for range decodeCycle {
				step(true, &ton)
				step(false, &toff)
			}
			ton, toff, tr = 0, 0, 0
			for i := 0; b.Loop(); i++ {
				// Alternating which goes first: the step after a read
				// pass starts with the other's weights in no cache.
				if i%2 == 0 {
					step(true, &ton)
					step(false, &toff)
				} else {
					step(false, &toff)
					step(true, &ton)
				}
			}
			reportPaired(b, perToken, read, tr, "on", ton, "off", toff)
		})
	}
}

// reportPaired reports two ways of decoding, timed a and z over b.N steps
// each and alternated with read passes that took tr in all: each way's
// fraction of the read rate, and z's time over a's (speedup).
func reportPaired(b *testing.B, perToken int64, read *readPass, tr time.Duration, aName string, a time.Duration, zName string, z time.Duration) {
	readGBs := float64(read.bytes) * float64(2*b.N) / tr.Seconds() / 1e9
	gbs := func(d time.Duration) float64 { return float64(perToken) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbs(a)/readGBs, aName+"-fraction")
	b.ReportMetric(gbs(z)/readGBs, zName+"-fraction")
	b.ReportMetric(z.Seconds()/a.Seconds(), "speedup")
}

// readPass is a Q8_0 weight of rows of 2048 holding about a model's bytes
// per token, with one activation row to multiply it by.
type readPass struct {
	be     kernels.Backend
	w      kernels.Tensor
	x, dst kernels.Tensor
	rows   int
	bytes  int64
}

func newReadPass(tb testing.TB, be kernels.Backend, bytes int64) *readPass {
	tb.Helper()
	const in = 2048
	rb := kernels.Q8_0.RowBytes(in)
	rows := int(bytes) / rb
	data := make([]byte, rows*rb)
	r := rand.New(rand.NewPCG(26, 6))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for blk := 0; blk < len(data); blk += 34 {
		data[blk], data[blk+1] = 0x00, 0x1c // d = 2^-8 as f16: no NaN or subnormal scale
	}
	w, err := be.Upload(kernels.HostTensor{Name: "read-pass", DType: kernels.Q8_0, Shape: []int{rows, in}, Data: data})
	if err != nil {
		tb.Fatal(err)
	}
	x, err := be.Alloc(1, in)
	if err != nil {
		tb.Fatal(err)
	}
	dst, err := be.Alloc(1, rows)
	if err != nil {
		tb.Fatal(err)
	}
	return &readPass{be: be, w: w, x: x, dst: dst, rows: rows, bytes: int64(len(data))}
}

func (p *readPass) run(tb testing.TB) {
	if err := p.be.MatMul(p.dst, p.x, p.w, nil, 1); err != nil {
		tb.Fatal(err)
	}
}
