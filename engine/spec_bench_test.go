package engine

import (
	"testing"
	"time"
)

// benchEditText is an edit-style workload: the answer repeats long spans
// of the prompt (a function rewritten with one change).
const benchEditText = `Rewrite this Go function so that it skips empty lines; change nothing else.

func countWords(lines []string) map[string]int {
	counts := make(map[string]int)
	for _, line := range lines {
		for _, word := range strings.Fields(line) {
			word = strings.ToLower(strings.Trim(word, ".,;:!?"))
			counts[word]++
		}
	}
	return counts
}

Here is the rewritten function:

func countWords(lines []string) map[string]int {
	counts := make(map[string]int)
	for _, line := range lines {
`

const benchFreeText = "Write a short story about a lighthouse keeper who finds a message in a bottle. Once upon a time,"

// BenchmarkSpeculative: single-stream decode tokens/s on the default model
// with and without n-gram speculation (self-tuned, K 6), on an edit-style
// prompt and on free text. Each iteration generates once without and once
// with speculation, alternately, so a shared and loaded machine slows both
// alike; speedup is their ratio. The time counted is from the first token
// to the last (decode only; the prompt's prefill is the same work both ways).
func BenchmarkSpeculative(b *testing.B) {
	path := smolPath(b)
	tok := smolTokenizer(b, path)
	const gen, k = 96, DefaultSpecK
	for _, w := range []struct{ name, text string }{{"edit", benchEditText}, {"free", benchFreeText}} {
		b.Run(w.name, func(b *testing.B) {
			p := tok.Encode(w.text, false)
			mk := func(spec bool) *Engine {
				cfg := Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1, EOG: nil}
				if spec {
					cfg.Speculate = SpecConfig{Method: "ngram", K: k, LogitRows: 1 + k}
				}
				return newEngineOn(b, loadModel(b, path, 2, 64, 16, 512, 1+k), cfg)
			}
			engines := [2]*Engine{mk(false), mk(true)}
			var dur [2]time.Duration
			var toks [2]int
			for b.Loop() {
				for i, e := range engines {
					s := submit(b, e, Request{Prompt: p, MaxTokens: gen})
					<-s.Tokens()
					start := time.Now()
					for range s.Tokens() {
						toks[i]++
					}
					dur[i] += time.Since(start)
				}
			}
			plain, spec := float64(toks[0])/dur[0].Seconds(), float64(toks[1])/dur[1].Seconds()
			b.ReportMetric(plain, "plain-tok/s")
			b.ReportMetric(spec, "spec-tok/s")
			b.ReportMetric(spec/plain, "speedup")
			st := engines[1].Stats()
			if st.SpecDraftTokens > 0 {
				b.ReportMetric(float64(st.SpecAcceptedTokens)/float64(st.SpecDraftTokens), "accept-rate")
			}
			b.ReportMetric(float64(st.SpecDraftTokens)/float64(max(toks[1], 1)), "draft-rows/tok")
		})
	}
}
