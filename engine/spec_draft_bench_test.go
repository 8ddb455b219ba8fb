package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
)

// BenchmarkSpeculativeDraft: decode tokens/s on the default model with a
// draft model on its backend (self-tuned, K DefaultSpecK) against plain
// decoding, single stream and a batch of 4, on free text and the edit
// prompt. Drafts: SmolLM2 itself
// (another instance: acceptance ~1 under greedy, but each draft token
// costs a full forward) and SmolLM2 cut to its first 20 and 10 of 30
// layers (writeFirstLayers). Each iteration generates once plainly and
// once with each draft, in turn, so a loaded machine slows all alike; the
// time counted is from the first token of the batch to its last.
func BenchmarkSpeculativeDraft(b *testing.B) {
	path := smolPath(b)
	tok := smolTokenizer(b, path)
	const gen, k = 64, DefaultSpecK
	drafts := []struct{ name, path string }{{"self", path}, {"first20", writeFirstLayers(b, path, 20)}, {"first10", writeFirstLayers(b, path, 10)}}
	for _, w := range []struct{ name, text string }{{"free", benchFreeText}, {"edit", benchEditText}} {
		for _, seqs := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/seqs=%d", w.name, seqs), func(b *testing.B) {
				p := tok.Encode(w.text, false)
				mk := func(draft string) *Engine {
					cfg := Config{Blocks: 64, BlockSize: 16, MaxSeqs: seqs}
					if draft == "" {
						return newEngineOn(b, loadModel(b, path, 2, 64, 16, 512, seqs), cfg)
					}
					rows := seqs * (1 + k)
					target, dm := loadWithDraft(b, path, draft, rows, seqs)
					cfg.Speculate = SpecConfig{Method: "draft", K: k, LogitRows: rows, DraftBlocks: 64, Draft: dm}
					return newEngineOn(b, target, cfg)
				}
				engines := []*Engine{mk("")}
				for _, d := range drafts {
					engines = append(engines, mk(d.path))
				}
				dur := make([]time.Duration, len(engines))
				toks := make([]int, len(engines))
				for b.Loop() {
					for i, e := range engines {
						ss := make([]*Sequence, seqs)
						for j := range ss {
							ss[j] = submit(b, e, Request{Prompt: append(p, int32(j)), MaxTokens: gen})
						}
						var start time.Time
						var once sync.Once
						var wg sync.WaitGroup
						var mu sync.Mutex
						for _, s := range ss {
							wg.Go(func() {
								<-s.Tokens()
								once.Do(func() { start = time.Now() })
								n := 0
								for range s.Tokens() {
									n++
								}
								mu.Lock()
								toks[i] += n
								mu.Unlock()
							})
						}
						wg.Wait()
						dur[i] += time.Since(start)
					}
				}
				plain := float64(toks[0]) / dur[0].Seconds()
				b.ReportMetric(plain, "plain-tok/s")
				for i, d := range drafts {
					e := engines[i+1]
					rate := float64(toks[i+1]) / dur[i+1].Seconds()
					st := e.Stats()
					b.ReportMetric(rate/plain, d.name+"-speedup")
					if st.SpecDraftTokens > 0 {
						b.ReportMetric(float64(st.SpecAcceptedTokens)/float64(st.SpecDraftTokens), d.name+"-accept")
					}
					b.ReportMetric(float64(e.draft.forwards)/float64(max(toks[i+1], 1)), d.name+"-draftfwd/tok")
					// Rows include each prompt's: every token goes through the draft once.
					b.ReportMetric(float64(e.draft.rows)/float64(max(toks[i+1], 1)), d.name+"-draftrows/tok")
				}
			})
		}
	}
}

// BenchmarkDraftAcceptance: the share of draft tokens SmolLM2 accepts from
// itself cut to its first N of 30 layers, drafting K 4 every step (Fixed),
// greedy, one stream of 64 tokens on free text and on the edit prompt.
// Deterministic: what it measures is the draft, not the machine.
func BenchmarkDraftAcceptance(b *testing.B) {
	path := smolPath(b)
	tok := smolTokenizer(b, path)
	const gen, k = 64, 4
	for _, layers := range []int{10, 15, 20, 25, 30} {
		draft := path
		if layers < 30 {
			draft = writeFirstLayers(b, path, layers)
		}
		b.Run(fmt.Sprintf("layers=%d", layers), func(b *testing.B) {
			for b.Loop() {
				for _, w := range []struct{ name, text string }{{"free", benchFreeText}, {"edit", benchEditText}} {
					target, dm := loadWithDraft(b, path, draft, 1+k, 1)
					cfg := Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1, Speculate: SpecConfig{Method: "draft", K: k, Fixed: true,
						LogitRows: 1 + k, DraftBlocks: 64, Draft: dm}}
					e := newEngineOn(b, target, cfg)
					collect(b, submit(b, e, Request{Prompt: tok.Encode(w.text, false), MaxTokens: gen}), 0)
					st := idleStats(b, e)
					b.ReportMetric(float64(st.SpecAcceptedTokens)/float64(st.SpecDraftTokens), w.name+"-accept")
					b.ReportMetric(float64(gen-1)/float64(max(st.SpecDrafts, 1)), w.name+"-tok/verify")
				}
			}
		})
	}
}

// loadWithDraft loads a target (rows logit rows) and its draft (seqs) on
// one CPU backend of 2 threads, as the loader does: two backends would
// each keep their helpers spinning while the other computes (cpu
// parallel.go), which on 2 cores costs the one running a core.
func loadWithDraft(tb testing.TB, target, draft string, rows, seqs int) (Model, Model) {
	tb.Helper()
	be := cpu.New(2)
	tb.Cleanup(func() { be.Close() })
	load := func(path string, seqs int) Model {
		src, err := models.Open(path)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { src.Close() })
		m, err := models.Load(src, be, models.Options{KVBlocks: 64, BlockSize: 16, MaxBatchTokens: 512, MaxSeqs: seqs})
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	return load(target, rows), load(draft, seqs)
}

// idleStats waits for the loop to publish a snapshot with nothing running.
func idleStats(tb testing.TB, e *Engine) *Stats {
	tb.Helper()
	for range 1000 {
		if st := e.Stats(); st.Running == 0 && st.Waiting == 0 {
			return st
		}
		time.Sleep(2 * time.Millisecond)
	}
	tb.Fatal("engine never idle")
	return nil
}
