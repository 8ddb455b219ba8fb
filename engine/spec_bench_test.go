package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
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

// benchJSONText is a second edit-style workload: a JSON document to
// pretty-print with one field changed, whose answer repeats its values
// between new line breaks and indents, so its copy runs are shorter than
// benchEditText's and break at every field.
const benchJSONText = `Pretty-print this JSON with two-space indentation and change "status" to "shipped"; keep everything else the same.

{"id": 4821, "customer": {"name": "Ada Lovelace", "email": "ada@example.com", "address": {"street": "12 Analytical Row", "city": "London", "postcode": "NW1 6XE"}}, "items": [{"sku": "BK-1843", "title": "Notes on the Engine", "qty": 2, "price": 18.5}, {"sku": "PN-0007", "title": "Brass gear set", "qty": 1, "price": 42.0}], "status": "pending", "notes": "Leave at the side door"}

Here is the pretty-printed JSON:

{
  "id": 4821,
  "customer": {
`

const benchFreeText = "Write a short story about a lighthouse keeper who finds a message in a bottle. Once upon a time,"

// benchSpecWorkloads are BenchmarkSpeculative's and BenchmarkSpecReplay's
// prompts: two edits, whose answers repeat the prompt, and free text, whose
// drafts mostly miss.
var benchSpecWorkloads = []struct{ name, text string }{
	{"edit", benchEditText}, {"json", benchJSONText}, {"free", benchFreeText},
}

// BenchmarkSpeculative: single-stream decode tokens/s on the default model
// with and without n-gram speculation (self-tuned, K 8), on two edit-style
// prompts and on free text. Each iteration generates once without and once
// with speculation, alternately, so a shared and loaded machine slows both
// alike; speedup is their ratio. The time counted is from the first token
// to the last (decode only; the prompt's prefill is the same work both ways).
func BenchmarkSpeculative(b *testing.B) {
	path := smolPath(b)
	tok := smolTokenizer(b, path)
	const gen, k = 96, DefaultSpecK
	for _, w := range benchSpecWorkloads {
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

// BenchmarkSpecStepRows: the time of a one-sequence decode step of 1+k rows
// (a token and k drafts, each with its logits) over the time of a one-row
// step, on the default model at 2 threads: what one more draft row costs,
// which self-tuning (spec.go) learns online. The row counts take turns step
// by step, so a load that comes and goes on a shared machine falls on all
// of them alike.
func BenchmarkSpecStepRows(b *testing.B) {
	path := smolPath(b)
	const maxRows, ctx, bs = 16, 120, 16
	m := loadModel(b, path, 2, 64, bs, 512, maxRows)
	table := make([]int32, (ctx+maxRows+bs-1)/bs)
	for i := range table {
		table[i] = int32(i)
	}
	batch := func(start, n int) *kernels.Batch {
		kb := &kernels.Batch{Seqs: []kernels.SeqRows{{End: n, ContextLen: start + n, Prompt: ctx, Blocks: table}}}
		for i := range n {
			pos := int32(start + i)
			kb.Tokens = append(kb.Tokens, int32(1000+37*(start+i)%20000))
			kb.Positions = append(kb.Positions, pos)
			kb.Slots = append(kb.Slots, pos)
			if start >= ctx {
				kb.LogitRows = append(kb.LogitRows, int32(i))
			}
		}
		if start < ctx {
			kb.LogitRows = []int32{int32(n - 1)}
		}
		return kb
	}
	if _, err := m.Forward(batch(0, ctx)); err != nil { // the context the decode rows attend to
		b.Fatal(err)
	}
	steps := make([]*kernels.Batch, maxRows+1)
	for n := 1; n <= maxRows; n++ {
		steps[n] = batch(ctx, n)
	}
	var dur [maxRows + 1]time.Duration
	for b.Loop() {
		for n := 1; n <= maxRows; n++ {
			start := time.Now()
			if _, err := m.Forward(steps[n]); err != nil {
				b.Fatal(err)
			}
			dur[n] += time.Since(start)
		}
	}
	b.ReportMetric(dur[1].Seconds()*1e3/float64(b.N), "ms/1-row-step")
	for n := 2; n <= maxRows; n++ {
		b.ReportMetric(float64(dur[n])/float64(dur[1]), fmt.Sprintf("t%d/t1", n))
	}
}

// specQuietSteps is BenchmarkSpecStepRows (SmolLM2, 2 threads, AVX-512
// VNNI four- and eight-row Q4_1 kernels, 3a32662; means of 4 runs at load
// 1.5-2.6): a decode step of r rows over a one-row step. With the AVX2
// kernels (a quiet machine) it was 1, 1.17, 1.63, 1.66, 2.09, 2.50, 3.00,
// 2.89, 3.31, 3.71, 4.31, 4.33, 4.79, 5.17, 5.69, 5.70.
var specQuietSteps = []float64{0, 1, 1.18, 1.55, 1.35, 1.69, 2.25, 2.59, 2.37, 2.72, 3.16, 3.63, 3.51, 3.89, 4.34, 4.76, 4.69}

// specAMDSteps is the same on an AMD EPYC (Zen 4: AVX-512 VNNI, no AMX,
// 2 cores, 32 MiB L3) shared with other jobs (issue 26, the AVX-512 VNNI
// kernels, before 56c8bfc's attention runs). Its shape differs from
// specQuietSteps': a 3-row step costs what a 4-row one does and a 2-row
// step more than a third of a row over the plain one, where 7, 11 and 15
// rows cost more than 8, 12 and 16 on both; a policy tuned on one table
// alone learns that machine's step sizes.
var specAMDSteps = []float64{0, 1, 1.44, 1.90, 1.95, 2.52, 3.08, 3.56, 3.26, 3.71, 4.28, 4.95, 4.56, 5.24, 5.54, 6.49, 6.10}

// specIceLakeSteps is the same on an Intel Xeon without AMX (Ice Lake-SP,
// AVX-512 VNNI, 2 cores, 48 MiB L3; means of 4 runs, quiet) with the
// two- and three-activation kernels over groups of eight weight rows
// (126084a): 2 and 3 rows cost little over one, 4 more than 3 by a third
// of a row.
var specIceLakeSteps = []float64{0, 1, 1.22, 1.42, 1.77, 2.31, 2.61, 2.93, 2.83, 3.36, 3.56, 3.82, 4.19, 4.80, 5.10, 5.36, 5.32}

// specIceLakeX16Steps is the same machine with Q4_1 and Q8_0 matrices in
// groups of sixteen rows and the kernels that sum a block's products in
// int32 before one scaling (kernels/cpu x16pack.go; means of 3 runs,
// quiet): a row past the first costs a tenth to a fifth of a one-row step
// up to 8 rows, and 16 rows cost a third of sixteen steps.
var specIceLakeX16Steps = []float64{0, 1, 1.10, 1.23, 1.34, 1.61, 1.78, 1.87, 1.89, 2.16, 2.30, 2.48, 2.60, 2.90, 3.04, 3.25, 3.33}

// specZen3X8Steps is the same on an AMD EPYC without AVX-512 (Zen 3, 2
// cores, 32 MiB L3, slow memory: a one-row step 10-11 ms) with Q4_1 and
// Q8_0 matrices in groups of eight rows and the AVX2 kernels that sum a
// block's products exactly before one scaling (dotx8_amd64.s; means of 2
// runs): 2 and 3 rows cost little over one, as on Ice Lake-SP, but the
// slope past 4 rows is twice as steep.
var specZen3X8Steps = []float64{0, 1, 1.09, 1.18, 1.32, 1.56, 1.76, 1.95, 2.13, 2.39, 2.58, 2.78, 2.94, 3.23, 3.42, 3.69, 3.91}

// specReplayTables are the step costs BenchmarkSpecReplay prices by.
var specReplayTables = []struct {
	name  string
	steps []float64
}{{"xeon", specQuietSteps}, {"epyc", specAMDSteps}, {"icelake", specIceLakeSteps}, {"icelake-x16", specIceLakeX16Steps}, {"zen3-x8", specZen3X8Steps}}

// BenchmarkSpecReplay: the n-gram proposer and its self-tuning on
// BenchmarkSpeculative's workloads without the machine's noise. Each
// workload's greedy answer (SmolLM2, 96 tokens) is generated once; the
// benchmark then replays it step by step through ngramDraft, draftLen and
// score as the engine runs them, one sequence, each step priced by a
// measured table of step times (specReplayTables: several machines, so that a
// policy is not fitted to one machine's step sizes). speedup is the plain
// decode's time over the replay's; oracle-speedup carries exactly the
// drafts that will be accepted (the most this proposer's drafts can give at
// these step costs); fixed-speedup is the best rule of the form "carry c
// drafts (1-8) wherever the match is at least m tokens (MinNGram or
// specLongMatch)", picked for that workload and table in hindsight: a
// self-tuning that does not reach it has lost to a constant, and the gap
// from it to the oracle is what no draft length chosen from the match
// length alone can close.
func BenchmarkSpecReplay(b *testing.B) {
	path := smolPath(b)
	tok := smolTokenizer(b, path)
	e := newEngineOn(b, loadModel(b, path, 2, 64, 16, 512, 1), Config{Blocks: 64, BlockSize: 16, MaxSeqs: 1})
	cfg := SpecConfig{Method: "ngram"}
	if err := cfg.validate(); err != nil {
		b.Fatal(err)
	}
	for _, w := range benchSpecWorkloads {
		p := tok.Encode(w.text, false)
		s := submit(b, e, Request{Prompt: p, MaxTokens: 96})
		var out []int32
		for t := range s.Tokens() {
			out = append(out, t.ID)
		}
		for _, tab := range specReplayTables {
			b.Run(w.name+"/"+tab.name, func(b *testing.B) {
				plain := float64(len(out)-1) * tab.steps[1] // the first token is the prefill's
				var spec, oracle, fixed float64
				var steps, rows int
				for b.Loop() {
					spec, steps, rows = specReplay(p, out, cfg, tab.steps, replaySelfTuned)
					oracle, _, _ = specReplay(p, out, cfg, tab.steps, replayOracle)
					fixed = plain // c = 0
					for _, m := range []int{cfg.MinNGram, specLongMatch} {
						for c := 1; c <= cfg.K; c++ {
							t, _, _ := specReplay(p, out, cfg, tab.steps, replayFixed(c, m))
							fixed = min(fixed, t)
						}
					}
				}
				b.ReportMetric(plain/spec, "speedup")
				b.ReportMetric(plain/oracle, "oracle-speedup")
				b.ReportMetric(plain/fixed, "fixed-speedup")
				b.ReportMetric(float64(steps), "steps")
				b.ReportMetric(float64(rows-steps)/float64(len(out)-1), "draft-rows/tok")
			})
		}
	}
}

// replayPolicy is how many of a proposal's drafts specReplay carries: the
// match length ext behind them (ngramDraft), how many were proposed and
// (known to the replay only) how many are right.
type replayPolicy func(st *specState, r *rowCost, ext, proposed, right int) int

// replaySelfTuned is the engine's choice (propose).
func replaySelfTuned(st *specState, r *rowCost, ext, proposed, _ int) int {
	return r.draftLen(st, ext, proposed, 1)
}

// replayOracle carries exactly the drafts that will be accepted.
func replayOracle(_ *specState, _ *rowCost, _, _, right int) int { return right }

// replayFixed carries c drafts wherever the match is at least m tokens.
func replayFixed(c, m int) replayPolicy {
	return func(_ *specState, _ *rowCost, ext, proposed, _ int) int {
		if ext < m {
			return 0
		}
		return min(c, proposed)
	}
}

// specReplay decodes out after prompt as one speculating sequence would,
// with cfg's proposer, carrying the drafts policy chooses, the self-tuning
// fed the step times of table (a step of r rows costs table[r]), and
// returns the decode's time in one-row steps, its steps and its rows.
func specReplay(prompt, out []int32, cfg SpecConfig, table []float64, policy replayPolicy) (cost float64, steps, rows int) {
	var r rowCost
	for range 4 {
		for n := 1; n < len(table); n++ {
			r.add(n, 1, time.Duration(table[n]*float64(time.Millisecond)))
		}
	}
	var st specState
	h := append([]int32(nil), prompt...)
	h = append(h, out[0])
	var buf []int32
	for i := 1; i < len(out); {
		k := min(cfg.K, len(table)-2, len(out)-i-1)
		prop, ext := st.ngramPropose(h, cfg.MinNGram, cfg.NGram, k, buf[:0])
		buf = prop
		right := 0
		for right < len(prop) && prop[right] == out[i+right] {
			right++
		}
		n := policy(&st, &r, ext, len(prop), right)
		kept := min(n, right)
		if len(prop) > 0 {
			st.score(prop, ext, kept, out[i+kept])
		}
		cost += table[1+n]
		steps++
		rows += 1 + n
		h = append(h, out[i:i+kept+1]...)
		if len(prop) > 0 {
			st.follow(h, kept, out[i+kept])
		}
		i += kept + 1
	}
	return cost, steps, rows
}

// BenchmarkNgramDraft: one proposal's cost where the scan is longest, a
// specWindow-token history in which no suffix recurs (every length from
// NGram down to MinNGram scans the whole window), beside the 6-18 ms of a
// SmolLM2 decode step on this CPU.
func BenchmarkNgramDraft(b *testing.B) {
	h := make([]int32, specWindow)
	for i := range h {
		h[i] = int32(i)
	}
	out := make([]int32, 0, DefaultSpecK)
	for b.Loop() {
		if d, _ := ngramDraft(h, DefaultSpecMinNGram, DefaultSpecNGram, DefaultSpecK, out[:0]); len(d) != 0 {
			b.Fatal("a draft from a history without a repeat")
		}
	}
}
