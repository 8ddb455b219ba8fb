package engine

import (
	"testing"
	"time"
)

// BenchmarkSmolLM2PromptLogprobs is what prompt logprobs cost a prefill: a
// 1024-token prompt on the default model (2 threads, the server's default
// 512-token steps and 64 sequences, so 64 logit rows per RowLogits call),
// submitted alone with MaxTokens 1, alternately without and with
// prompt_logprobs 5, each iteration one of each, the prefix cache off so
// both compute every position. plain-ms and logprobs-ms are the mean
// submit-to-end times; ratio is logprobs-ms / plain-ms.
//
//	go test ./engine -run XXX -bench SmolLM2PromptLogprobs -benchtime 6x
func BenchmarkSmolLM2PromptLogprobs(b *testing.B) {
	const plen = 1024
	m := loadModel(b, smolPath(b), 2, 80, 16, 512, 64)
	e := newEngineOn(b, m.Model, Config{Blocks: 80, BlockSize: 16, MaxBatchTokens: 512, MaxSeqs: 64, DisablePrefixCache: true})
	p := prompt(plen, 7, 49152)
	run := func(pl *PromptLogprobs) time.Duration {
		start := time.Now()
		s := submit(b, e, Request{Prompt: p, MaxTokens: 1, PromptLogprobs: pl})
		if r := s.Result(); r.Finish == FinishError {
			b.Fatal(r.Err)
		}
		if pl != nil && pl.Logprobs[plen-1] == nil {
			b.Fatal("no prompt logprobs")
		}
		return time.Since(start)
	}
	run(nil) // warm: the first step allocates
	var plain, withLP time.Duration
	for b.Loop() {
		plain += run(nil)
		withLP += run(&PromptLogprobs{TopK: 5})
	}
	n := float64(b.N)
	b.ReportMetric(plain.Seconds()*1000/n, "plain-ms")
	b.ReportMetric(withLP.Seconds()*1000/n, "logprobs-ms")
	b.ReportMetric(withLP.Seconds()/plain.Seconds(), "ratio")
}
