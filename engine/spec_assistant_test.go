package engine

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// The assistant tests run a tiny random Gemma 4 (window layers of 5 tokens
// and global layers, as models' assistant golden) with a random assistant
// drafting for it: the engine must give the plain greedy output token for
// token, and every draft row it runs must be the row the assistant gives
// when run by hand on the sequence's own state.
var (
	assistTarget = modeltest.Spec{Layers: 4, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Seed: 71, RMSEps: 1e-6,
		Gemma4: true, Window: 5, WindowPattern: 2, HeadDimFull: 32, KVHeadsFull: 1, KEqV: true, PartialRotaryFull: 0.25,
		LayerScale: true, FinalSoftcap: 30, RopeTheta: 1e6}
	assistSpec = modeltest.AssistantSpec{Hidden: 32, Layers: 2, Heads: 4, FFN: 64, Window: []bool{true, false}, Seed: 72}
)

func assistPair(t testing.TB) (target, assistant string) {
	t.Helper()
	dir := t.TempDir()
	target, assistant = filepath.Join(dir, "target.gguf"), filepath.Join(dir, "assistant.gguf")
	if err := modeltest.WriteGGUF(target, assistTarget, kernels.F32); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteGemma4Assistant(assistant, assistSpec, assistTarget); err != nil {
		t.Fatal(err)
	}
	return target, assistant
}

// loadAssisted loads the target for seqs sequences of 1+k logit rows and
// the assistant beside it for seqs rows.
func loadAssisted(t testing.TB, target, assistant string, blocks, bs, batch, logitRows, seqs int) (*models.Llama, *models.Gemma4Assistant) {
	t.Helper()
	src, err := models.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	t.Cleanup(func() { be.Close(); src.Close() })
	m, err := models.Load(src, be, models.Options{KVBlocks: blocks, BlockSize: bs, MaxBatchTokens: batch, MaxSeqs: logitRows})
	if err != nil {
		t.Fatal(err)
	}
	asrc, err := models.Open(assistant)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { asrc.Close() })
	a, err := models.LoadGemma4Assistant(asrc, m, seqs)
	if err != nil {
		t.Fatal(err)
	}
	return m, a
}

// assistCall is one Forward of the assistant as the engine ran it.
type assistCall struct {
	tokens, positions, rows []int32
	fromTarget              bool
	logits                  [][]float32 // the assistant's own, before any nudge
}

// nudgedAssistant records every call and, where it can tell the sequence
// (the only one whose known output has the row's token at the row's
// position), makes the first draft of every other position the target's
// true next token: the verify path then keeps a draft and rejects the next,
// and the next pass must take its h from the row after the sequence's
// first. The recorded logits are the assistant's.
type nudgedAssistant struct {
	Assistant
	known [][]int32 // prompt + plain greedy output of each sequence
	calls []assistCall
}

func (n *nudgedAssistant) Forward(b *kernels.Batch, fromTarget bool, rows []int32) ([]float32, error) {
	logits, err := n.Assistant.Forward(b, fromTarget, rows)
	if err != nil {
		return nil, err
	}
	v := n.VocabSize()
	c := assistCall{tokens: slices.Clone(b.Tokens), positions: slices.Clone(b.Positions), rows: slices.Clone(rows), fromTarget: fromTarget}
	for r := range b.Tokens {
		c.logits = append(c.logits, slices.Clone(logits[r*v:(r+1)*v]))
	}
	n.calls = append(n.calls, c)
	if !fromTarget {
		return logits, nil
	}
	for r, tok := range b.Tokens {
		p := int(b.Positions[r])
		if p%2 != 0 {
			continue
		}
		match := -1
		for i, k := range n.known {
			if p+1 < len(k) && k[p] == tok {
				if match >= 0 {
					match = -2
					break
				}
				match = i
			}
		}
		if match >= 0 {
			logits[r*v+int(n.known[match][p+1])] = 1e9
		}
	}
	return logits, nil
}

// TestAssistantGreedy: with the assistant drafting (K 3, fixed, so every
// decode drafts, and self-tuned), greedy output equals the plain engine's
// token for token, alone and for 4 sequences at once, and fixed drafts
// were verified and kept.
func TestAssistantGreedy(t *testing.T) {
	const seqs, k, n = 4, 3, 24
	target, assistant := assistPair(t)
	var prompts [][]int32
	for i := range seqs {
		prompts = append(prompts, prompt(9+5*i, int32(11+i), assistTarget.Vocab))
	}
	base := &hooked{Model: mustLoad(t, target, seqs)}
	plainCfg := Config{Blocks: 96, BlockSize: 4, MaxBatchTokens: 64, MaxSeqs: seqs}
	solo, margins := soloRuns(t, base, newEngineOn(t, base, plainCfg), prompts, n)
	known := make([][]int32, seqs)
	for i := range prompts {
		known[i] = append(slices.Clone(prompts[i]), solo[i]...)
	}
	for _, fixed := range []bool{true, false} {
		t.Run(fmt.Sprintf("fixed=%v", fixed), func(t *testing.T) {
			m, a := loadAssisted(t, target, assistant, 96, 4, 64, seqs*(1+k), seqs)
			na := &nudgedAssistant{Assistant: a, known: known}
			cfg := plainCfg
			cfg.Speculate = SpecConfig{Method: "draft", Assistant: na, K: k, Fixed: fixed, LogitRows: seqs * (1 + k)}
			e := newEngineOn(t, m, cfg)
			got, _ := collect(t, submit(t, e, Request{Prompt: prompts[0], MaxTokens: n}), 0)
			sameGreedy(t, "alone", got, solo[0], margins[0])
			together := runConcurrent(t, e, prompts, n)
			for i := range prompts {
				sameGreedy(t, fmt.Sprintf("batched %d", i), together[i], solo[i], margins[i])
			}
			st := e.Stats()
			t.Logf("drafts %d, draft tokens %d, accepted %d; assistant forwards %d, rows %d", st.SpecDrafts, st.SpecDraftTokens, st.SpecAcceptedTokens, e.assist.forwards, e.assist.rowsRun)
			// Self-tuned, the random assistant may rightly stop drafting
			// (its drafts are the nudged ones alone): only fixed must draft.
			if fixed && (st.SpecDraftTokens == 0 || st.SpecAcceptedTokens == 0) {
				t.Fatal("no draft verified and kept: the assistant path was not exercised")
			}
			if e.assist.failures > 0 {
				t.Fatalf("%d assistant passes failed", e.assist.failures)
			}
		})
	}
}

func mustLoad(t testing.TB, path string, seqs int) Model {
	t.Helper()
	src, err := models.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New(1)
	t.Cleanup(func() { be.Close(); src.Close() })
	m, err := models.Load(src, be, models.Options{KVBlocks: 96, BlockSize: 4, MaxBatchTokens: 64, MaxSeqs: seqs})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAssistantDraftsMatchReference: every assistant row the engine ran for
// one sequence (the first drafts, fed the target's hidden row of the
// position before, and the chained ones) has the logits of the assistant
// run by hand on a fresh target that computed the sequence's tokens below
// that position: the engine hands the right target row, after kept and
// rejected drafts alike, and the target's K/V the assistant reads is the
// sequence's.
func TestAssistantDraftsMatchReference(t *testing.T) {
	const k, n = 3, 30
	target, assistant := assistPair(t)
	p0 := prompt(17, 5, assistTarget.Vocab)
	base := &hooked{Model: mustLoad(t, target, 1)}
	solo, _ := soloRuns(t, base, newEngineOn(t, base, Config{Blocks: 96, BlockSize: 4, MaxBatchTokens: 64, MaxSeqs: 1}), [][]int32{p0}, n)
	all := append(slices.Clone(p0), solo[0]...)
	m, a := loadAssisted(t, target, assistant, 96, 4, 64, 1+k, 1)
	na := &nudgedAssistant{Assistant: a, known: [][]int32{all}}
	e := newEngineOn(t, m, Config{Blocks: 96, BlockSize: 4, MaxBatchTokens: 64, MaxSeqs: 1,
		Speculate: SpecConfig{Method: "draft", Assistant: na, K: k, Fixed: true, LogitRows: 1 + k}})
	got, _ := collect(t, submit(t, e, Request{Prompt: p0, MaxTokens: n}), 0)
	if !slices.Equal(got, solo[0]) {
		t.Fatalf("output %v, plain %v", got, solo[0])
	}
	if st := e.Stats(); st.SpecAcceptedTokens == 0 {
		t.Fatal("no draft kept: the rows after a kept draft were not exercised")
	}

	ref, ra := loadAssisted(t, target, assistant, 96, 4, 64, 1, 1)
	table := make([]int32, 24)
	for i := range table {
		table[i] = int32(i)
	}
	worst, scale, firsts := 0.0, 0.0, 0
	for _, c := range na.calls {
		if len(c.tokens) != 1 {
			t.Fatalf("a call of %d rows for one sequence", len(c.tokens))
		}
		p := int(c.positions[0])
		if c.fromTarget {
			firsts++
			if all[p] != c.tokens[0] {
				t.Fatalf("a first draft at %d fed %d, the sequence has %d", p, c.tokens[0], all[p])
			}
			// The prompt's rows as the engine flags them: a backend may
			// pick another kernel for a prompt row (kernels.PromptRows).
			b := &kernels.Batch{Tokens: all[:p], Seqs: []kernels.SeqRows{{Start: 0, End: p, ContextLen: p, Blocks: table, Prompt: len(p0)}},
				LogitRows: []int32{int32(p - 1)}}
			for i := range p {
				b.Positions, b.Slots = append(b.Positions, int32(i)), append(b.Slots, int32(i))
			}
			if _, err := ref.Forward(b); err != nil {
				t.Fatal(err)
			}
		}
		row := int32(p - 1)
		if !c.fromTarget {
			row = 0
		}
		b := &kernels.Batch{Tokens: c.tokens, Positions: c.positions, Seqs: []kernels.SeqRows{{Start: 0, End: 1, ContextLen: p, Blocks: table}}}
		want, err := ra.Forward(b, c.fromTarget, []int32{row})
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			worst = max(worst, math.Abs(float64(c.logits[0][i]-w)))
			scale = max(scale, math.Abs(float64(w)))
		}
	}
	t.Logf("%d assistant rows (%d first drafts): worst |Δ| %.2g of %.3g", len(na.calls), firsts, worst, scale)
	if firsts == 0 || worst > 1e-4*scale {
		t.Fatalf("worst |Δlogit| %.3g of %.3g over %d rows (%d first)", worst, scale, len(na.calls), firsts)
	}
}
