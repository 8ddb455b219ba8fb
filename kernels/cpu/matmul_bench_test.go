package cpu

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// BenchmarkMatMul runs the default model's (SmolLM2-135M Q4_1) matmul shapes:
// attention q/o [576→576], k/v [576→192], FFN gate/up [576→1536] and down
// [1536→576] in Q4_1, the tied output head [576→49152] in Q8_0. GFLOP/s counts
// 2·n·in·out; GB/s is weight bytes read per second (each weight once per call).
func BenchmarkMatMul(b *testing.B) {
	shapes := []struct {
		name    string
		dt      kernels.DType
		in, out int
	}{
		{"attn_q", kernels.Q4_1, 576, 576},
		{"attn_k", kernels.Q4_1, 576, 192},
		{"ffn_up", kernels.Q4_1, 576, 1536},
		{"ffn_down", kernels.Q4_1, 1536, 576},
		{"output", kernels.Q8_0, 576, 49152},
		{"ffn_up", kernels.F16, 576, 1536},
		{"ffn_up", kernels.BF16, 576, 1536},
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, sh := range shapes {
		wt, _ := weightTensor(b, r, sh.dt, sh.out, sh.in)
		for _, n := range []int{1, 4, 16, 64} {
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s_%v_%dx%d/n=%d/t=%d", sh.name, sh.dt, sh.out, sh.in, n, threads), func(b *testing.B) {
					x := randVec(r, n*sh.in)
					dst := make([]float32, n*sh.out)
					w := testWorkers(b, threads)
					b.ReportAllocs()
					cpu0 := processCPU()
					for b.Loop() {
						matMul(w, dst, x, n, sh.in, wt, sh.out, nil)
					}
					reportFlops(b, 2*float64(n*sh.in*sh.out), processCPU()-cpu0)
					b.ReportMetric(float64(len(wt.raw))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
		}
	}
}

// BenchmarkDot measures the kernels alone on one FFN-down-sized row
// (1536 elements), weight and activation in L1: the compute ceiling.
func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	const in = 1536
	for _, dt := range quantTypes {
		k := quantKernels[dt]
		w := mustQuantize(b, dt, randVec(r, in))
		nb := in / dt.BlockElems()
		xq := make([]byte, nb*k.actBlockBytes)
		k.quantize(xq, randVec(r, in))
		for _, impl := range []struct {
			name string
			dot  vecDot
		}{{"rows", func(w, x []byte, nb int) float32 {
			var d [1]float32
			k.rows(d[:], w, len(w), x, nb)
			return d[0]
		}}, {"generic", k.generic}} {
			b.Run(dt.String()+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					impl.dot(w, xq, nb)
				}
				reportFlops(b, 2*in, processCPU()-cpu0)
			})
		}
	}
	a, c := randVec(r, 64), randVec(r, 64)
	b.Run("F32/64", func(b *testing.B) {
		cpu0 := processCPU()
		for b.Loop() {
			dotF32(a, c)
		}
		reportFlops(b, 2*64, processCPU()-cpu0)
	})
}

// reportFlops reports GFLOP/s of wall time and GFLOP per CPU-second (the
// latter sums all threads, so it is per-core efficiency, and it is what to
// read on a loaded machine).
func reportFlops(b *testing.B, flopsPerOp, cpuSec float64) {
	total := flopsPerOp * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpuSec > 0 {
		b.ReportMetric(total/cpuSec/1e9, "GFLOP/cpu-s")
	}
}

// randomBlocks makes rows×in weights of dt (any quantized type but Q8_K) from
// random bytes with sane f16 scales: quantizing 134M floats with the
// reference quantizer would take longer than the benchmark.
func randomBlocks(r *rand.Rand, dt kernels.DType, rows, in int) *tensor {
	raw := make([]byte, rows*dt.RowBytes(in))
	for i := 0; i < len(raw); i += 8 {
		binary.LittleEndian.PutUint64(raw[i:], r.Uint64())
	}
	// byte offsets of each block's f16 scales
	scales := map[kernels.DType][]int{
		kernels.Q4_0: {0}, kernels.Q4_1: {0, 2}, kernels.Q5_0: {0}, kernels.Q5_1: {0, 2}, kernels.Q8_0: {0},
		kernels.Q4_K: {0, 2}, kernels.Q5_K: {0, 2}, kernels.Q6_K: {208},
	}[dt]
	for b := 0; b < len(raw); b += dt.BlockBytes() {
		for _, off := range scales {
			binary.LittleEndian.PutUint16(raw[b+off:], quant.F32ToF16(float32(r.NormFloat64())*0.01))
		}
	}
	return &tensor{shape: []int{rows, in}, dtype: dt, raw: raw}
}

// BenchmarkDecodeStep runs every matmul of one SmolLM2-135M decode step (30
// layers of Q4_1 q/k/v/o/gate/up/down, then the Q8_0 output head) over 96 MB
// of distinct weights, so that, as in the real model, they stream from
// memory instead of sitting in cache. tokens/s is the ceiling the matmuls
// alone allow; n=16 is a step of 16 sequences decoding together, each
// weight read once for the 16.
func BenchmarkDecodeStep(b *testing.B) {
	const ffn, vocab = 1536, 49152
	r := rand.New(rand.NewPCG(3, 3))
	step := smolStep(r)
	var flops float64
	for _, m := range step {
		flops += 2 * float64(m.in*m.out)
	}
	// n sequences decoding together: one step is n tokens.
	for _, n := range []int{1, 16} {
		x := randVec(r, n*ffn)
		dst := make([]float32, n*vocab)
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("n=%d/t=%d", n, threads), func(b *testing.B) {
				w := testWorkers(b, threads)
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					for _, m := range step {
						matMul(w, dst, x, n, m.in, m.wt, m.out, nil)
					}
				}
				cpuSec := processCPU() - cpu0
				reportFlops(b, float64(n)*flops, cpuSec)
				b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
				if cpuSec > 0 {
					b.ReportMetric(float64(n*b.N)/cpuSec, "tokens/cpu-s")
				}
			})
		}
	}
}

// stepMatMul is one matMul of a model step: weights wt, in → out.
type stepMatMul struct {
	wt      *tensor
	in, out int
}

// smolStep makes the matmuls of one SmolLM2-135M step (30 layers of Q4_1
// q/k/v/o/gate/up/down, then the Q8_0 output head), 96 MB of distinct
// weights.
func smolStep(r *rand.Rand) []stepMatMul {
	const layers, hidden, ffn, kv, vocab = 30, 576, 1536, 192, 49152
	var step []stepMatMul
	for range layers {
		for _, s := range [][2]int{{hidden, hidden}, {hidden, kv}, {hidden, kv}, {hidden, hidden}, {hidden, ffn}, {hidden, ffn}, {ffn, hidden}} {
			step = append(step, stepMatMul{randomBlocks(r, kernels.Q4_1, s[1], s[0]), s[0], s[1]})
		}
	}
	return append(step, stepMatMul{randomBlocks(r, kernels.Q8_0, vocab, hidden), hidden, vocab})
}

// BenchmarkVerifyStep: BenchmarkDecodeStep's matmuls for one sequence's
// speculative verify step of n = 1..9 rows (a token and n−1 drafts, every
// row through the output head), on one thread, in CPU time per step: the
// matmul part of BenchmarkSpecStepRows's step costs, steadier than its wall
// clock on a shared machine. Each step runs twice, with rows2M, rows3
// and padding (new) and without them (old: rows2, and rows for an odd
// row), taking turns so that load on a shared machine falls on both alike.
// The cost of n rows over one is the ratio of n's cpu-ms to n=1's.
func BenchmarkVerifyStep(b *testing.B) {
	const ffn, vocab = 1536, 49152
	r := rand.New(rand.NewPCG(3, 3))
	step := smolStep(r)
	x := randVec(r, 9*ffn)
	dst := make([]float32, 9*vocab)
	w := testWorkers(b, 1)
	var saved []quantKernel
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0} {
		saved = append(saved, *quantKernels[dt])
	}
	use := func(v int) {
		for i, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0} {
			k, s := quantKernels[dt], saved[i]
			k.rows2M, k.rows3, k.pad = nil, nil, padding{}
			if v == 1 {
				k.rows2M, k.rows3, k.pad = s.rows2M, s.rows3, s.pad
			}
		}
	}
	defer use(1)
	var cpu [2][10]float64
	for b.Loop() {
		for n := 1; n <= 9; n++ {
			for v := range 2 {
				use(v)
				cpu0 := processCPU()
				for _, m := range step {
					matMul(w, dst, x, n, m.in, m.wt, m.out, nil)
				}
				cpu[v][n] += processCPU() - cpu0
			}
		}
	}
	for n := 1; n <= 9; n++ {
		b.ReportMetric(cpu[0][n]*1e3/float64(b.N), fmt.Sprintf("n%d-old-cpu-ms", n))
		b.ReportMetric(cpu[1][n]*1e3/float64(b.N), fmt.Sprintf("n%d-new-cpu-ms", n))
	}
}

// BenchmarkVerifyPad: BenchmarkVerifyStep for n = 1..7 with the last
// group padded to 8 from p rows (p = 5..8, 8: never) and to 4 from q rows
// (q = 1..4, 4: never), the settings taking turns step by step so that
// load on a shared machine falls on them alike; cpu-ms/step per n and
// grouping of its rows (8p: 8 with padding). The SmolLM2 step (Q4_1 and Q8_0)
// and a Gemma 3 270M-shaped one whose layers are all Q5_0 (18 of q 640 →
// 1024, k and v → 256, o 1024 → 640, gate and up → 2048, down 2048 → 640).
func BenchmarkVerifyPad(b *testing.B) {
	const ffn, vocab = 2048, 49152
	r := rand.New(rand.NewPCG(3, 3))
	var gemma []stepMatMul
	for range 18 {
		for _, s := range [][2]int{{640, 1024}, {640, 256}, {640, 256}, {1024, 640}, {640, 2048}, {640, 2048}, {2048, 640}} {
			gemma = append(gemma, stepMatMul{randomBlocks(r, kernels.Q5_0, s[1], s[0]), s[0], s[1]})
		}
	}
	steps := []struct {
		name string
		mm   []stepMatMul
		dts  []kernels.DType
	}{{"smol", smolStep(r), []kernels.DType{kernels.Q4_1, kernels.Q8_0}}, {"gemmaQ5_0", gemma, []kernels.DType{kernels.Q5_0}}}
	x := randVec(r, 8*ffn)
	dst := make([]float32, 8*vocab)
	w := testWorkers(b, 1)
	saved := map[kernels.DType]padding{}
	for _, dt := range []kernels.DType{kernels.Q4_1, kernels.Q8_0, kernels.Q5_0} {
		saved[dt] = quantKernels[dt].pad
	}
	defer func() {
		for dt, p := range saved {
			quantKernels[dt].pad = p
		}
	}()
	type key struct {
		s, n   int
		groups string
	}
	cpu := map[key]float64{}
	for b.Loop() {
		for si, st := range steps {
			for n := 1; n <= 7; n++ {
				seen := map[string]bool{}
				for p := 5; p <= 8; p++ {
					for q := 1; q <= 4; q++ {
						g := &matScratch{k: quantKernels[st.dts[0]], padTo: padding{p, q}}
						var groups string
						for i := 0; i < n; {
							m := g.group(i, n)
							groups += fmt.Sprintf("+%d", m)
							if i+m > n {
								groups += "p"
							}
							i += m
						}
						if seen[groups] {
							continue // a setting that does not change n's groups
						}
						seen[groups] = true
						for _, dt := range st.dts {
							quantKernels[dt].pad = padding{p, q}
						}
						cpu0 := processCPU()
						for _, m := range st.mm {
							matMul(w, dst, x, n, m.in, m.wt, m.out, nil)
						}
						cpu[key{si, n, groups[1:]}] += processCPU() - cpu0
					}
				}
			}
		}
	}
	for k, v := range cpu {
		b.ReportMetric(v*1e3/float64(b.N), fmt.Sprintf("%s-n%d-%s-cpu-ms", steps[k.s].name, k.n, k.groups))
	}
}

// BenchmarkMatMulStreaming: one activation row against 64 MB of weights of
// each type, twice the L3 cache, as decoding a model larger than cache does.
// GB/s here is the memory throughput the kernel sustains.
func BenchmarkMatMulStreaming(b *testing.B) {
	r := rand.New(rand.NewPCG(4, 4))
	const in = 2048
	for _, dt := range quantTypes[:len(quantTypes)-1] { // Q8_K is an activation format
		rows := (64 << 20) / dt.RowBytes(in)
		wt := randomBlocks(r, dt, rows, in)
		x := randVec(r, in)
		dst := make([]float32, rows)
		b.Run(dt.String(), func(b *testing.B) {
			w := testWorkers(b, 1)
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				matMul(w, dst, x, 1, in, wt, rows, nil)
			}
			reportFlops(b, 2*float64(rows*in), processCPU()-cpu0)
			b.ReportMetric(float64(len(wt.raw))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkExp: softmax's exp over a 1024-position row and SwiGLU over one
// FFN row (1536), assembly against the float64 math.Exp loop they replace.
func BenchmarkExp(b *testing.B) {
	r := rand.New(rand.NewPCG(6, 6))
	s, g, u := randVec(r, 1024), randVec(r, 1536), randVec(r, 1536)
	dst := make([]float32, 1536)
	for _, impl := range []struct {
		name string
		exp  func(dst, x []float32, sub float32) float32
		silu func(dst, gate, up []float32)
	}{{"fast", expF32, siluMulF32}, {"generic", expF32Generic, siluMulF32Generic}} {
		b.Run("softmax1024/"+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				impl.exp(dst, s, 3)
			}
		})
		b.Run("swiglu1536/"+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				impl.silu(dst, g, u)
			}
		})
	}
}

// BenchmarkMatMulKQuants: the K-quant types of Q4_K_M files on an FFN-down
// shape (in must be a multiple of 256), decode and prefill sized.
func BenchmarkMatMulKQuants(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	const in, out = 1536, 576
	for _, dt := range []kernels.DType{kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		wt := randomBlocks(r, dt, out, in)
		for _, n := range []int{1, 16} {
			b.Run(fmt.Sprintf("%v/n=%d", dt, n), func(b *testing.B) {
				x, dst := randVec(r, n*in), make([]float32, n*out)
				w := testWorkers(b, 1)
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					matMul(w, dst, x, n, in, wt, out, nil)
				}
				reportFlops(b, 2*float64(n*in*out), processCPU()-cpu0)
			})
		}
	}
}

// BenchmarkDecodeMatMuls: the weights of one SmolLM2-135M decode step read
// three ways, one activation row, each step followed by a Q8_0 one-row pass
// over 100 MB of other weights that both pushes the step's bytes out of the
// cache and measures the read rate in the same moment:
//
//	seven   seven MatMuls a layer (q, k, v, o, gate, up, down), as
//	        before kernels.SharedInput
//	four    q, k, v and gate, up as shared-input calls (matMulShared)
//	stream  the same Q4_1 bytes as one MatMul, rows of 576, then the head
//
// fraction is the step's bytes per second over the pass's. What stream
// reaches and four does not is what a step loses by being 121 operations
// instead of one: each starts its weights' stream afresh and ends with a
// hand-off, whatever it computes.
func BenchmarkDecodeMatMuls(b *testing.B) {
	const layers, hidden, ffn, kv, vocab = 30, 576, 1536, 192, 49152
	r := rand.New(rand.NewPCG(26, 26))
	q41 := func(out, in int) *tensor { return randomBlocks(r, kernels.Q4_1, out, in) }
	type layer struct{ q, k, v, o, gate, up, down *tensor }
	ls := make([]layer, layers)
	for i := range ls {
		ls[i] = layer{q41(hidden, hidden), q41(kv, hidden), q41(kv, hidden), q41(hidden, hidden),
			q41(ffn, hidden), q41(ffn, hidden), q41(hidden, ffn)}
	}
	head := randomBlocks(r, kernels.Q8_0, vocab, hidden)
	streamRows := layers * (2*hidden*hidden + 2*kv*hidden + 3*ffn*hidden) / hidden
	stream := q41(streamRows, hidden)
	flush := randomBlocks(r, kernels.Q8_0, (100<<20)/kernels.Q8_0.RowBytes(2048), 2048)
	fx, fdst := randVec(r, 2048), make([]float32, flush.rows())
	x, dst := randVec(r, ffn), make([]float32, max(vocab, streamRows))
	q, k, v := make([]float32, hidden), make([]float32, kv), make([]float32, kv)
	gate, up := make([]float32, ffn), make([]float32, ffn)
	bytes := len(head.raw) + len(stream.raw)
	steps := map[string]func(w *workers){
		"seven": func(w *workers) {
			for _, l := range ls {
				for _, m := range []*tensor{l.q, l.k, l.v, l.o, l.gate, l.up} {
					matMul(w, dst, x, 1, hidden, m, m.rows(), nil)
				}
				matMul(w, dst, x, 1, ffn, l.down, hidden, nil)
			}
			matMul(w, dst, x, 1, hidden, head, vocab, nil)
		},
		"four": func(w *workers) {
			for _, l := range ls {
				matMulShared(w, []matArgs{{dst: q, x: x, wt: l.q, in: hidden, out: hidden},
					{dst: k, x: x, wt: l.k, in: hidden, out: kv}, {dst: v, x: x, wt: l.v, in: hidden, out: kv}}, 1)
				matMul(w, dst, x, 1, hidden, l.o, hidden, nil)
				matMulShared(w, []matArgs{{dst: gate, x: x, wt: l.gate, in: hidden, out: ffn},
					{dst: up, x: x, wt: l.up, in: hidden, out: ffn}}, 1)
				matMul(w, dst, x, 1, ffn, l.down, hidden, nil)
			}
			matMul(w, dst, x, 1, hidden, head, vocab, nil)
		},
		"stream": func(w *workers) {
			matMul(w, dst, x, 1, hidden, stream, streamRows, nil)
			matMul(w, dst, x, 1, hidden, head, vocab, nil)
		},
	}
	for _, threads := range []int{1, 2} {
		for _, name := range []string{"seven", "four", "stream"} {
			b.Run(fmt.Sprintf("%s/threads=%d", name, threads), func(b *testing.B) {
				w := testWorkers(b, threads)
				step := steps[name]
				var stepTime, readTime time.Duration
				for b.Loop() {
					t0 := time.Now()
					step(w)
					t1 := time.Now()
					matMul(w, fdst, fx, 1, 2048, flush, flush.rows(), nil)
					stepTime += t1.Sub(t0)
					readTime += time.Since(t1)
				}
				stepGBs := float64(bytes) * float64(b.N) / stepTime.Seconds() / 1e9
				readGBs := float64(len(flush.raw)) * float64(b.N) / readTime.Seconds() / 1e9
				b.ReportMetric(stepGBs, "step-GB/s")
				b.ReportMetric(stepGBs/readGBs, "fraction")
			})
		}
	}
}
