//go:build unix

package engine

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSmolLM2PromptStep is the per-step table of BENCHMARKS.md's "four-client
// dip" (issue 26): 4 sequences decode on the default model with 2 threads
// while, each iteration, one request with a prompt of p tokens arrives and
// is prefilled whole in the next step beside them (for p=0 an iteration is
// one decode step). step-ms is the median wall time of the steps with
// 4 + p rows, decode-step-ms that of the plain decode steps (4 rows) in the
// same run, so their difference is what p prompt tokens add to a step: a
// fixed cost for any prompt row shows as p=1 costing what p=16 does.
// Medians and CPU time, because this machine is shared: cpu-ms/op is the
// process's CPU time an iteration (the mixed step and the decode steps
// that ran while the request waited, steps/op of them in all).
//
//	go test ./engine -run '^$' -bench SmolLM2PromptStep -benchtime 8x
func BenchmarkSmolLM2PromptStep(b *testing.B) {
	path := smolPath(b)
	for _, p := range []int{0, 1, 16, 32, 64, 128, 256} {
		b.Run(fmt.Sprintf("prompt=%d", p), func(b *testing.B) {
			const decoders, plen, gen = 4, 64, 1000
			blocks := (decoders*(plen+gen)+p+15)/16 + 8
			m := loadModel(b, path, 2, blocks, 16, 512, decoders+1)
			rec := &stepSamples{}
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
			steps0, cpu0 := e.Stats().Steps, processCPU()
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
			cpu, steps := processCPU()-cpu0, e.Stats().Steps-steps0
			select {
			case <-seqs[0].Done():
				b.Fatal("the decoders finished during the benchmark: raise gen")
			default:
			}
			b.ReportMetric(rec.median(decoders+p).Seconds()*1000, "step-ms")
			b.ReportMetric(rec.median(decoders).Seconds()*1000, "decode-step-ms")
			b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
		})
	}
}

// stepSamples is an Observer that keeps every step's duration by batch rows.
type stepSamples struct {
	mu sync.Mutex
	d  map[int][]time.Duration
}

func (o *stepSamples) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.d = map[int][]time.Duration{}
}

func (o *stepSamples) median(rows int) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := slices.Clone(o.d[rows])
	if len(s) == 0 {
		return 0
	}
	slices.Sort(s)
	return s[len(s)/2]
}

func (o *stepSamples) OnStep(d time.Duration, rows int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.d != nil {
		o.d[rows] = append(o.d[rows], d)
	}
}

func (o *stepSamples) OnFirstToken(*Sequence, time.Time)         {}
func (o *stepSamples) OnToken(*Sequence, time.Time)              {}
func (o *stepSamples) OnFinish(*Sequence, Result, time.Duration) {}
func (o *stepSamples) OnReclaim(time.Duration)                   {}

// processCPU is the user + system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
