//go:build amd64 && !noasm

package cpu

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// BenchmarkReadBandwidth is the machine's read ceiling that decode's weight
// reads are held to (issue 26; models' BenchmarkDecodeBandwidth is the
// other side). Each of 1 or 2 threads reads its half of a buffer once a
// pass with the AVX2 f32 dot (a buffer dotted with itself: one load and
// an FMA per 32 bytes: ~60 GB/s a core from L2, so memory sets the pace).
//
// Why streams: a core reads DRAM and far L3 only as fast as it keeps
// misses in flight. One sequential stream leaves that to the hardware
// prefetcher; decode's row kernels read two weight rows at a time and
// prefetch two more 8 rows ahead, and on the Xeon VM these figures were
// first taken on a Q8_0 decode read 12.5 GB/s on one thread where one
// stream read 10.4. So each thread's half is split into S parts read in
// turn, streamFloats of each (f32xS), and beside them the Q8_0 row kernel
// (the repo's own dot over the same bytes, with its software prefetch) is
// timed on one activation row (q8_0rows): the ceiling is the best of these.
//
// Sizes: L2 (1 MiB), inside the cache (48 MiB), each model's bytes per
// token (92 MiB SmolLM2-135M Q4_1, 235 MiB Gemma 3 270M Q4_K_M, 641 MiB
// the synthetic Q8_0 Llama: BenchmarkDecodeBandwidth's MB/token), 128 MiB
// and 2 GiB. That VM reports a 480 MiB L3 but served reads from it only up
// to ~64 MiB on one thread and ~100 MiB on two: the size, not the L3's
// nominal capacity, says which rate a model is held to.
func BenchmarkReadBandwidth(b *testing.B) {
	if !useAVX2 {
		b.Skip("no AVX2")
	}
	sizes := []struct {
		name  string
		bytes int
	}{{"1MiB", 1 << 20}, {"48MiB", 48 << 20}, {"SmolLM2=92MiB", 96_580_000}, {"128MiB", 128 << 20},
		{"Gemma3=235MiB", 246_600_000}, {"synthetic=641MiB", 672_000_000}, {"2GiB", 2 << 30}}
	for _, size := range sizes {
		var buf []float32 // made by the first sub-benchmark the -bench pattern picks
		data := func() []float32 {
			if buf == nil {
				buf = make([]float32, size.bytes/4/streamFloats/16*streamFloats*16) // whole chunks for 16 parts
				for i := range buf {
					buf[i] = float32(i & 63) // every page written: fresh pages all map one zero page
				}
			}
			return buf
		}
		var q8 *tensor // the same bytes as Q8_0 rows of 2048, the synthetic model's
		for _, threads := range []int{1, 2} {
			for _, streams := range []int{1, 4, 8} {
				b.Run(fmt.Sprintf("%s/threads=%d/f32x%d", size.name, threads, streams), func(b *testing.B) {
					buf := data()
					readPass(buf, threads, streams)
					for b.Loop() {
						readPass(buf, threads, streams)
					}
					b.ReportMetric(float64(len(buf)*4)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
				})
			}
			b.Run(fmt.Sprintf("%s/threads=%d/q8_0rows", size.name, threads), func(b *testing.B) {
				const in = 2048
				if q8 == nil {
					q8 = randomBlocks(rand.New(rand.NewPCG(26, 26)), kernels.Q8_0, size.bytes/kernels.Q8_0.RowBytes(in), in)
				}
				rows := q8.shape[0]
				w := testWorkers(b, threads)
				x, dst := randVec(rand.New(rand.NewPCG(27, 27)), in), make([]float32, rows)
				matMul(w, dst, x, 1, in, q8, rows, nil)
				for b.Loop() {
					matMul(w, dst, x, 1, in, q8, rows, nil)
				}
				b.ReportMetric(float64(len(q8.raw))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
		buf, q8 = nil, nil
	}
}

// streamFloats is how much of one part is read before the next part's
// turn: 2 KiB, so a call's overhead is small beside its misses and every
// part keeps a prefetch stream alive.
const streamFloats = 512

var readSink float32

// readPass reads buf once: thread t its t-th contiguous share, as decode's
// matmuls hand each thread a range of weight rows.
func readPass(buf []float32, threads, streams int) {
	share := len(buf) / threads
	if threads == 1 {
		readSink += readShare(buf, streams)
		return
	}
	var wg sync.WaitGroup
	sums := make([]float32, threads)
	for t := range threads {
		wg.Go(func() { sums[t] = readShare(buf[t*share:(t+1)*share], streams) })
	}
	wg.Wait()
	for _, s := range sums {
		readSink += s
	}
}

func readShare(buf []float32, streams int) float32 {
	part := len(buf) / streams / streamFloats * streamFloats
	var s float32
	for off := 0; off < part; off += streamFloats {
		for p := range streams {
			c := &buf[p*part+off]
			s += dotF32AVX2(c, c, streamFloats)
		}
	}
	return s
}
