package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
)

// BenchmarkReclaim measures cancellation → blocks back in the pool while the
// loop is busy with 8 other decoding sequences (hash model: steps are short,
// so this is mostly the loop's own boundary latency). Reported as
// reclaim-ns, the mean of Sequence.ReclaimLatency.
func BenchmarkReclaim(b *testing.B) {
	m := newHashModel(64, 1<<16, 4096, 16)
	e := newTestEngine(b, m, Config{MaxSeqs: 16, DisablePrefixCache: true})
	for i := range 8 {
		submit(b, e, Request{Prompt: prompt(16, int32(i), 64), MaxTokens: 1 << 15})
	}
	var total time.Duration
	n := 0
	for b.Loop() {
		ctx, cancel := context.WithCancel(bg)
		s, err := e.Submit(ctx, Request{Prompt: prompt(40, int32(n), 64), MaxTokens: 1000})
		if err != nil {
			b.Fatal(err)
		}
		<-s.Tokens()
		cancel()
		total += s.ReclaimLatency()
		n++
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(n), "reclaim-ns")
}

// BenchmarkSmolLM2Decode is the throughput figure: c sequences of a
// 16-token prompt generating 32 tokens each on the default model, 2 threads.
// decode-tok/s is the aggregate rate once every sequence has its first
// token; ttft-ms is the mean time to first token, all submitted at once.
//
//	go test ./engine -run XXX -bench SmolLM2Decode -benchtime 1x
func BenchmarkSmolLM2Decode(b *testing.B) {
	path := smolPath(b)
	for _, c := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("seqs=%d", c), func(b *testing.B) {
			const plen, gen = 16, 32
			blocks := c*(plen+gen+15)/16 + 8
			m := loadModel(b, path, 2, blocks, 16, 512, c)
			e := newEngineOn(b, m, Config{Blocks: blocks, BlockSize: 16, MaxBatchTokens: 512, MaxSeqs: c, MaxQueue: c})
			var ttft, decode time.Duration
			tokens := 0
			for b.Loop() {
				start := time.Now()
				seqs := make([]*Sequence, c)
				for i := range seqs {
					seqs[i] = submit(b, e, Request{Prompt: prompt(plen, int32(i), 49152), MaxTokens: gen})
				}
				var lastFirst time.Time
				for _, s := range seqs {
					<-s.Tokens()
					now := time.Now()
					ttft += now.Sub(start)
					lastFirst = now
				}
				for _, s := range seqs {
					for range s.Tokens() {
						tokens++
					}
				}
				decode += time.Since(lastFirst)
			}
			b.ReportMetric(float64(tokens)/decode.Seconds(), "decode-tok/s")
			b.ReportMetric(ttft.Seconds()*1000/float64(b.N*c), "ttft-ms")
		})
	}
}

// flatModel returns the same logits for every row and computes nothing: it
// isolates the engine's own per-step cost (schedule, batch, sample, deliver).
type flatModel struct {
	vocab  int
	logits []float32 // a row of logits, repeated for as many rows as asked
}

func (m *flatModel) VocabSize() int  { return m.vocab }
func (m *flatModel) ContextLen() int { return 1 << 20 }
func (m *flatModel) Forward(b *kernels.Batch) ([]float32, error) {
	for len(m.logits) < len(b.LogitRows)*m.VocabSize() {
		m.logits = append(m.logits, m.logits[:m.VocabSize()]...)
	}
	return m.logits[:len(b.LogitRows)*m.VocabSize()], nil
}

// BenchmarkLoopOverhead: one op is one decode step of n sequences through
// the engine loop with a model that costs nothing (vocabulary 49152, greedy).
// Compare with a forward step of the real model (milliseconds).
func BenchmarkLoopOverhead(b *testing.B) {
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("seqs=%d", n), func(b *testing.B) {
			m := &flatModel{vocab: 49152, logits: make([]float32, 49152)}
			m.logits[7] = 1
			e := newEngineOn(b, m, Config{Blocks: n * 1100 / 16, MaxSeqs: n, MaxBatchTokens: 4096})
			seqs := make([]*Sequence, n)
			for i := range seqs {
				seqs[i] = submit(b, e, Request{Prompt: prompt(16, int32(i), 64), MaxTokens: 1024})
			}
			b.ReportAllocs()
			for b.Loop() {
				for i, s := range seqs {
					if _, ok := <-s.Tokens(); !ok { // finished: start another
						seqs[i] = submit(b, e, Request{Prompt: prompt(16, int32(i), 64), MaxTokens: 1024})
					}
				}
			}
			st := e.Stats()
			b.ReportMetric(float64(st.BusyTime.Nanoseconds())/float64(st.Steps), "ns/step")
		})
	}
}

// BenchmarkSmolLM2MixedStep measures what a new request's prefill costs the
// streams already running, the figure behind
// scheduler.DefaultMaxPrefillTokensWithDecodes: 16 sequences decode on the
// default model with 2 threads while, each iteration, one request with a
// prompt of p tokens arrives and is prefilled whole in the next step
// (uncapped here). step-ms is the mean wall time of those mixed steps (for
// p=0, of plain decode steps); decode-step-ms is that of the plain decode
// steps between them, so step-ms/decode-step-ms is how much longer every
// running stream waits for its next token when a prompt of p tokens arrives.
//
//	go test ./engine -run XXX -bench SmolLM2MixedStep -benchtime 5x
func BenchmarkSmolLM2MixedStep(b *testing.B) {
	path := smolPath(b)
	for _, p := range []int{0, 16, 32, 64, 96, 128, 256, 496} {
		b.Run(fmt.Sprintf("prefill=%d", p), func(b *testing.B) {
			const decoders, plen, gen = 16, 64, 400
			blocks := (decoders*(plen+gen)+p+15)/16 + 8
			m := loadModel(b, path, 2, blocks, 16, 512, decoders+1)
			rec := &stepTimes{}
			e := newEngineOn(b, m, Config{Blocks: blocks, BlockSize: 16, MaxBatchTokens: 512,
				MaxPrefillTokensWithDecodes: 512, MaxSeqs: decoders + 1, Observer: rec})
			seqs := make([]*Sequence, decoders)
			for i := range seqs {
				seqs[i] = submit(b, e, Request{Prompt: prompt(plen, int32(i), 49152), MaxTokens: gen})
			}
			for _, s := range seqs {
				<-s.Tokens()
			}
			rec.reset()
			n := 0
			for b.Loop() {
				if p == 0 {
					<-seqs[0].Tokens()
					continue
				}
				s := submit(b, e, Request{Prompt: prompt(p, int32(1000+n), 49152), MaxTokens: 1})
				s.Result()
				n++
			}
			mixed, decode := rec.mean(decoders+p), rec.mean(decoders)
			select {
			case <-seqs[0].Done():
				b.Fatal("the decoders finished during the benchmark: raise gen")
			default:
			}
			b.ReportMetric(mixed.Seconds()*1000, "step-ms")
			b.ReportMetric(decode.Seconds()*1000, "decode-step-ms")
		})
	}
}

// stepTimes is an Observer that keeps step durations by batch rows.
type stepTimes struct {
	mu    sync.Mutex
	total map[int]time.Duration
	count map[int]int
}

func (o *stepTimes) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.total, o.count = map[int]time.Duration{}, map[int]int{}
}

func (o *stepTimes) mean(rows int) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.count[rows] == 0 {
		return 0
	}
	return o.total[rows] / time.Duration(o.count[rows])
}

func (o *stepTimes) OnStep(d time.Duration, rows int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.total != nil {
		o.total[rows] += d
		o.count[rows]++
	}
}

func (o *stepTimes) OnFirstToken(*Sequence, time.Time)         {}
func (o *stepTimes) OnToken(*Sequence, time.Time)              {}
func (o *stepTimes) OnFinish(*Sequence, Result, time.Duration) {}
func (o *stepTimes) OnReclaim(time.Duration)                   {}
