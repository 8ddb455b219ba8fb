//go:build cudaemu

package engine

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cuda"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// Speculation on a device-sampled engine (devsample.go: sampleOnDevice,
// verifiedRows): every verify row of a speculating sequence is a logit row
// sampled on the CUDA backend's sampler (the emulator here), and the host
// verifies from its ids. The outputs must be the plain run's, token for
// token, greedy and seeded, alone and in a full batch, with the scheduler's
// and the pool's invariants checked before every forward and no block held
// after.

// checkedDev is devModel (the held first step and the per-step counts)
// with a check run before every forward, on the loop goroutine.
type checkedDev struct {
	*devModel
	check  func() error
	err    error       // the first check that failed
	drafts map[int]int // prompt length → draft rows its sequence computed
}

func (m *checkedDev) hook(b *kernels.Batch) {
	for _, q := range b.Seqs {
		if n := q.End - q.Start; n > 1 && q.ContextLen-n >= q.Prompt { // a decode carrying drafts
			m.drafts[q.Prompt] += n - 1
		}
	}
	if m.check == nil || m.err != nil {
		return
	}
	if err := m.check(); err != nil {
		m.err = fmt.Errorf("before step %d: %w", len(m.steps), err)
	}
}

func (m *checkedDev) Forward(b *kernels.Batch) ([]float32, error) {
	m.hook(b)
	return m.devModel.Forward(b)
}

func (m *checkedDev) ForwardDevice(b *kernels.Batch) (kernels.Tensor, error) {
	m.hook(b)
	return m.devModel.ForwardDevice(b)
}

// specDevRun is one engine's run of a request list.
type specDevRun struct {
	out    [][]int32
	lps    [][]*Logprob
	st     *Stats
	steps  []stepCopy
	drafts []int // per request: draft rows its sequence computed
}

// runSpecDev loads the model at path on be afresh, with room for every
// sequence's verify rows when spec speculates, and runs reqs on an engine
// over it: one after another, or (together) all in the batch from the
// second step on, the first step held until every request is queued so that
// two runs batch alike. host hides ForwardDevice (every row sampled on the
// host from its logits).
func runSpecDev(t *testing.T, be *cuda.Backend, path string, spec SpecConfig, reqs []Request, together, host bool) specDevRun {
	t.Helper()
	src, err := models.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const blocks, bs, batch = 96, 16, 128
	seqs := len(reqs)
	logitRows := seqs
	if spec.Method != "" {
		logitRows = seqs * (1 + spec.K)
		spec.LogitRows = logitRows
	}
	llama, err := models.Load(src, be, models.Options{KVBlocks: blocks, BlockSize: bs, MaxBatchTokens: batch, MaxSeqs: logitRows})
	if err != nil {
		t.Fatal(err)
	}
	m := &checkedDev{drafts: map[int]int{}, devModel: &devModel{Llama: llama, be: be, first: together, held: make(chan struct{}), release: make(chan struct{})}}
	var model Model = m
	if host {
		model = hostModel{m}
	}
	e, err := New(model, Config{Blocks: blocks, BlockSize: bs, MaxSeqs: seqs, MaxBatchTokens: batch, EOG: []int32{2}, Speculate: spec})
	if err != nil {
		t.Fatal(err)
	}
	if (e.dev != nil) == host {
		t.Fatalf("device sampling %v, want %v", e.dev != nil, !host)
	}
	m.check = func() error {
		if err := e.sched.CheckInvariants(); err != nil {
			return err
		}
		return e.pool.CheckInvariants()
	}
	run := specDevRun{out: make([][]int32, len(reqs)), lps: make([][]*Logprob, len(reqs))}
	drain := func(i int, s *Sequence) {
		for tok := range s.Tokens() {
			run.out[i] = append(run.out[i], tok.ID)
			if tok.Logprob != nil {
				run.lps[i] = append(run.lps[i], tok.Logprob)
			}
		}
		if r := s.Result(); r.Err != nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
	}
	if together {
		all := []*Sequence{submit(t, e, reqs[0])}
		<-m.held
		for _, r := range reqs[1:] {
			all = append(all, submit(t, e, r))
		}
		close(m.release)
		for i, s := range all {
			drain(i, s)
		}
	} else {
		for i, r := range reqs {
			drain(i, submit(t, e, r))
		}
	}
	if err := e.Close(bg); err != nil {
		t.Fatal(err)
	}
	if m.err != nil {
		t.Errorf("invariants: %v", m.err)
	}
	run.st, run.steps = e.Stats(), m.close()
	for _, r := range reqs {
		run.drafts = append(run.drafts, m.drafts[len(r.Prompt)]) // the tests' prompts differ in length
	}
	if run.st.KV.Used != 0 {
		t.Errorf("KV blocks leaked: %d of %d in use", run.st.KV.Used, run.st.KV.Total)
	}
	return run
}

// sameRuns compares two runs' outputs, request by request, and their
// logprobs when lps: only runs of the same batches can have the same
// logits, as the backend's matrix products sum in another order for
// another number of rows (a verify group's rows against a plain decode's
// one).
func sameRuns(t *testing.T, what string, got, want specDevRun, lps bool) {
	t.Helper()
	for i := range want.out {
		if !slices.Equal(got.out[i], want.out[i]) {
			t.Errorf("%s, request %d:\n got  %v\n want %v", what, i, got.out[i], want.out[i])
			continue
		}
		if !lps {
			continue
		}
		if len(got.lps[i]) != len(want.lps[i]) {
			t.Errorf("%s, request %d: %d logprobs, want %d", what, i, len(got.lps[i]), len(want.lps[i]))
			continue
		}
		for k := range got.lps[i] {
			if !sameLogprob(got.lps[i][k], want.lps[i][k]) {
				t.Errorf("%s, request %d, token %d: logprobs %+v, want %+v", what, i, k, *got.lps[i][k], *want.lps[i][k])
			}
		}
	}
}

// deviceRowsOnly checks that every logit row of every step was sampled on
// the device and none read back: the verify rows are the device's too.
func deviceRowsOnly(t *testing.T, what string, steps []stepCopy) {
	t.Helper()
	for i, s := range steps {
		if s.sampled != s.rows || s.read != 0 {
			t.Errorf("%s, step %d: %d logit rows, %d sampled on the device, %d read back", what, i, s.rows, s.sampled, s.read)
		}
	}
}

// specMixed checks a run both kept and rejected drafts: its verify rows
// were used and rolled back.
func specMixed(t *testing.T, what string, r specDevRun) {
	t.Helper()
	if st := r.st; st.SpecAcceptedTokens == 0 || st.SpecAcceptedTokens == st.SpecDraftTokens {
		t.Errorf("%s: %d of %d draft tokens accepted: want some kept and some rejected", what, st.SpecAcceptedTokens, st.SpecDraftTokens)
	}
}

// untiedSpec is tinySpec with an output matrix of its own: its greedy
// output does not settle on one token (tinySpec's does), so n-gram drafts
// are both kept and rejected.
func untiedSpec() modeltest.Spec {
	s := tinySpec
	s.Tied = false
	return s
}

func specLog(t *testing.T, what string, r specDevRun) {
	t.Logf("%s: %d steps, %d drafts, %d draft tokens, %d accepted", what, len(r.steps), r.st.SpecDrafts, r.st.SpecDraftTokens, r.st.SpecAcceptedTokens)
}

func writeSpecDevModel(t *testing.T, spec modeltest.Spec) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := modeltest.WriteGGUF(path, spec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDeviceSpecGreedy: greedy output with n-gram speculation (K 4,
// fixed: every proposal verified) on a device-sampled engine equals the
// plain device run's, each prompt alone and six in one full batch, on a
// tiny llama and a tiny mixture of experts, and with a draft model's
// drafts on the llama; every row is sampled on the device, drafts are kept
// and rejected, and no block is held after.
func TestDeviceSpecGreedy(t *testing.T) {
	be, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, c := range []struct {
		name string
		spec modeltest.Spec
	}{{"llama", untiedSpec()}, {"moe", tinyMoESpec}} {
		t.Run(c.name, func(t *testing.T) {
			path := writeSpecDevModel(t, c.spec)
			var reqs []Request
			for _, p := range editPrompts(6, c.spec.Vocab, 36) {
				reqs = append(reqs, Request{Prompt: p, MaxTokens: 32})
			}
			ngram := SpecConfig{Method: "ngram", K: 4, Fixed: true}
			plain := runSpecDev(t, be, path, SpecConfig{}, reqs, false, false)
			alone := runSpecDev(t, be, path, ngram, reqs, false, false)
			batch := runSpecDev(t, be, path, ngram, reqs, true, false)
			sameRuns(t, "alone", alone, plain, false)
			sameRuns(t, "full batch", batch, plain, false)
			for _, r := range []struct {
				what string
				run  specDevRun
			}{{"alone", alone}, {"full batch", batch}} {
				specLog(t, r.what, r.run)
				deviceRowsOnly(t, r.what, r.run.steps)
				specMixed(t, r.what, r.run)
			}
			if c.name != "llama" {
				return
			}
			// A draft model's guesses (the target's own weights on the CPU
			// backend) are verified the same way: the proposer is not the
			// device path's concern.
			dm := loadModel(t, path, 1, 64, 16, 128, len(reqs))
			drafted := runSpecDev(t, be, path, SpecConfig{Method: "draft", K: 4, Fixed: true, Draft: dm, DraftBlocks: 64}, reqs, true, false)
			sameRuns(t, "draft model, full batch", drafted, plain, false)
			specLog(t, "draft model, full batch", drafted)
			deviceRowsOnly(t, "draft model, full batch", drafted.steps)
			if drafted.st.SpecAcceptedTokens == 0 {
				t.Error("draft model: no draft kept")
			}
		})
	}
}

// TestDeviceSpecSeeded: seeded sampling with n-gram speculation on a
// device-sampled engine draws the plain run's numbers in the plain run's
// order: the same tokens as without drafts, alone and in a full batch, and
// the same tokens and logprobs as the host path with the same drafts. Most
// requests keep min_tokens' mask on throughout, which leaves ten ids of an
// untied model's flat rows to draw from, so drafts of one token (n-gram 1)
// are often kept and often rejected and each token turns on its draw. They
// mix device-sampled settings (top-k, min-p, penalties whose history runs
// through the drafts, greedy under penalties, logit_bias, logprobs
// computed on the device per verify row) with host-only rows (top-p alone)
// and rows the device leaves undecided (top-k 20 over the ten allowed:
// the −Inf ties pass the kernel's 1,024 candidates, so from such a row on
// the host samples with the draws still unspent).
func TestDeviceSpecSeeded(t *testing.T) {
	be, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	spec := untiedSpec()
	spec.Vocab = devVocab
	path := writeSpecDevModel(t, spec)
	vocab := spec.Vocab
	const n = 24
	seed := func(v uint64) *uint64 { return &v }
	ten := allBut(1000, 1010, vocab) // as stop tokens: the mask allows 1000-1009 until min_tokens
	params := []Request{
		{Sampling: SamplingParams{Temperature: 1, TopK: 5, Seed: seed(1)}},
		{Sampling: SamplingParams{Temperature: 1.2, MinP: 0.05, Seed: seed(2)}},
		{Sampling: SamplingParams{Temperature: 1, TopK: 8, RepetitionPenalty: 1.3, PresencePenalty: 0.2, FrequencyPenalty: 0.1, PenaltyLastN: 12, Seed: seed(3)}},
		{Sampling: SamplingParams{Temperature: 1, TopK: 20, Seed: seed(4)}},
		{Sampling: SamplingParams{Temperature: 0.9, TopK: 6, Seed: seed(5)}, LogitBias: map[int32]float32{1003: 1.5, 1007: -1}},
		{Sampling: SamplingParams{Temperature: 1, TopP: 0.9, Seed: seed(6)}},
		{Sampling: SamplingParams{RepetitionPenalty: 1.5, PenaltyLastN: 8}},
		{Sampling: SamplingParams{Temperature: 0.8, TopK: 40, Seed: seed(7)}, Logprobs: true, TopLogprobs: 3, LogitBias: map[int32]float32{}},
	}
	for id := int32(1000); id < 1010; id++ {
		params[7].LogitBias[id] = 20 // the ten ids as the others' mask has them, but logprobs see the row unbiased
	}
	prompts := editPrompts(len(params), vocab, 36)
	reqs := make([]Request, len(params))
	for i, r := range params {
		r.Prompt, r.MaxTokens = prompts[i], n
		if !r.Logprobs { // min_tokens with logprobs is host-only: that one is biased instead
			r.MinTokens, r.StopTokens = n, ten
		}
		r.Prompt = append(slices.Clone(r.Prompt), 1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009)
		reqs[i] = r
	}
	ngram := SpecConfig{Method: "ngram", K: 4, Fixed: true, MinNGram: 1, NGram: 3}
	plain := runSpecDev(t, be, path, SpecConfig{}, reqs, false, false)
	alone := runSpecDev(t, be, path, ngram, reqs, false, false)
	sameRuns(t, "alone, with drafts vs without", alone, plain, false)
	batch := runSpecDev(t, be, path, ngram, reqs, true, false)
	sameRuns(t, "full batch, with drafts vs without", batch, plain, false)
	hostBatch := runSpecDev(t, be, path, ngram, reqs, true, true)
	sameRuns(t, "full batch with drafts, device vs host sampling", batch, hostBatch, true)
	for _, r := range []struct {
		what string
		run  specDevRun
	}{{"alone", alone}, {"full batch", batch}} {
		specLog(t, r.what, r.run)
		specMixed(t, r.what, r.run)
		var rows, sampled, read, lps int
		for _, s := range r.run.steps {
			rows, sampled, read, lps = rows+s.rows, sampled+s.sampled, read+s.read, lps+s.logprobs
		}
		t.Logf("%s: %d logit rows, %d sampled on the device, %d read back, %d logprobs rows on the device; draft rows per request %v", r.what, rows, sampled, read, lps, r.run.drafts)
		for i, n := range r.run.drafts {
			if n == 0 {
				t.Errorf("%s: request %d (%+v) was verified from no draft", r.what, i, reqs[i].Sampling)
			}
		}
		if read == 0 || read >= rows || lps == 0 {
			t.Errorf("%s: %d of %d rows read back, %d logprobs rows: want some of each, not all read", r.what, read, rows, lps)
		}
	}
	t.Logf("outputs: %v", plain.out)
}
