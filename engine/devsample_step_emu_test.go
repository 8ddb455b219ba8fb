//go:build cudaemu

package engine

import (
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cuda"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

// devModel is a real model on the CUDA backend (the emulator) that holds
// the loop inside its first step until released, so that two runs of the
// same requests batch alike, and that counts, per step, what its device
// sampler was asked for and what the backend copied to the host.
type devModel struct {
	*models.Llama
	be      *cuda.Backend
	first   bool
	held    chan struct{}
	release chan struct{}

	mu    sync.Mutex
	steps []stepCopy
	last  int64 // DeviceToHostBytes at the start of the current step
}

// stepCopy is one step's traffic: logit rows, the ids SampleRows returned,
// the rows LogprobRows answered, the rows ReadRows copied, and the bytes the
// backend downloaded.
type stepCopy struct {
	rows, sampled, logprobs, read int
	bytes                         int64
}

func (m *devModel) hold(b *kernels.Batch) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.steps); n > 0 {
		m.steps[n-1].bytes = m.be.DeviceToHostBytes() - m.last
	}
	m.last = m.be.DeviceToHostBytes()
	m.steps = append(m.steps, stepCopy{rows: len(b.LogitRows)})
	if m.first {
		m.first = false
		m.mu.Unlock()
		m.held <- struct{}{}
		<-m.release
		m.mu.Lock()
	}
}

func (m *devModel) Forward(b *kernels.Batch) ([]float32, error) {
	m.hold(b)
	return m.Llama.Forward(b)
}

func (m *devModel) ForwardDevice(b *kernels.Batch) (kernels.Tensor, error) {
	m.hold(b)
	return m.Llama.ForwardDevice(b)
}

func (m *devModel) DeviceSampler() kernels.DeviceSampler {
	if ds := m.Llama.DeviceSampler(); ds != nil {
		return countingSampler{ds, m}
	}
	return nil
}

// close ends the last step's count; the engine has stopped.
func (m *devModel) close() []stepCopy {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.steps); n > 0 {
		m.steps[n-1].bytes = m.be.DeviceToHostBytes() - m.last
	}
	return m.steps
}

type countingSampler struct {
	kernels.DeviceSampler
	m *devModel
}

func (c countingSampler) SampleRows(l kernels.Tensor, p []kernels.SampleParams, dst []int32) error {
	c.m.mu.Lock()
	c.m.steps[len(c.m.steps)-1].sampled += len(p)
	c.m.mu.Unlock()
	return c.DeviceSampler.SampleRows(l, p, dst)
}

func (c countingSampler) LogprobRows(l kernels.Tensor, rows []kernels.LogprobRow, dst []kernels.RowLogprobs) error {
	c.m.mu.Lock()
	c.m.steps[len(c.m.steps)-1].logprobs += len(rows)
	c.m.mu.Unlock()
	return c.DeviceSampler.LogprobRows(l, rows, dst)
}

func (c countingSampler) ReadRows(l kernels.Tensor, rows []int32, dst []float32) error {
	c.m.mu.Lock()
	c.m.steps[len(c.m.steps)-1].read += len(rows)
	c.m.mu.Unlock()
	return c.DeviceSampler.ReadRows(l, rows, dst)
}

// hostModel hides ForwardDevice: the engine reads every logit row back and
// samples on the host, the path the device one must match.
type hostModel struct{ Model }

const devVocab = 2051 // more than the kernel's 1,024 top-k candidates, ending mid-word

// devRequests are device-sampled rows (greedy, seeded top-k/top-p, min-p,
// penalties, constraint masks, IgnoreEOS, min_tokens, logit_bias) and, with hostOnes, rows with
// logprobs (computed on the device, also on a constrained row), rows the
// device leaves Undecided (a constraint allowing fewer tokens than top-k:
// every −Inf logit ties at the k-th place), logit_bias with logprobs (which
// see the unbiased row) and host-only ones (top-p alone, min_tokens with
// logprobs until it is reached).
func devRequests(vocab int, hostOnes bool) []Request {
	seed := func(v uint64) *uint64 { return &v }
	reqs := []Request{
		{},
		{Sampling: SamplingParams{Temperature: 0.9, TopK: 40, TopP: 0.9, Seed: seed(1)}},
		{Sampling: SamplingParams{Temperature: 1.1, MinP: 0.05, Seed: seed(2)}},
		{Sampling: SamplingParams{Temperature: 1, TopK: 30, RepetitionPenalty: 1.3, PresencePenalty: 0.2, FrequencyPenalty: 0.1, PenaltyLastN: 8, Seed: seed(3)}},
		{Constraint: &stepConstraint{mod: 7, salt: 1, vocab: vocab}},
		{Sampling: SamplingParams{Temperature: 0.8, TopK: 20, Seed: seed(4)}, Constraint: &stepConstraint{mod: 3, salt: 2, vocab: vocab}},
		{Sampling: SamplingParams{Temperature: 1, TopK: 20, Seed: seed(5)}, IgnoreEOS: true},
		// min_tokens as a device mask, alone and over a constraint's: every
		// token but ten stops the sequence, but not before token 6
		{MinTokens: 6, StopTokens: allBut(1000, 1010, vocab), Sampling: SamplingParams{Temperature: 1, TopK: 5, Seed: seed(11)}},
		{MinTokens: 6, StopTokens: allBut(1000, 1010, vocab), Constraint: &stepConstraint{mod: 2, salt: 1, vocab: vocab}},
		// logit_bias on the kernel's copy: a +100 that decides greedy rows,
		// and biases under penalties, a constraint (a forbidden id biased up
		// stays out) and min_tokens
		{LogitBias: map[int32]float32{1003: 100, 7: -100}},
		{LogitBias: map[int32]float32{4: 5, 11: -3, 12: 2.5, 1001: 1}, Sampling: SamplingParams{Temperature: 1, TopK: 30, RepetitionPenalty: 1.3, PresencePenalty: 0.2, PenaltyLastN: 8, Seed: seed(12)},
			Constraint: &stepConstraint{mod: 3, salt: 1, vocab: vocab}},
		{MinTokens: 3, StopTokens: allBut(1000, 1010, vocab), LogitBias: map[int32]float32{1004: 4, 2: 50}, Sampling: SamplingParams{Temperature: 0.9, TopK: 8, Seed: seed(13)}},
	}
	if hostOnes {
		reqs = append(reqs,
			Request{Sampling: SamplingParams{Temperature: 1, TopK: 20, Seed: seed(10)}, Constraint: &stepConstraint{mod: 501, vocab: vocab}},
			Request{Logprobs: true, TopLogprobs: 3, Sampling: SamplingParams{Temperature: 1, TopK: 50, Seed: seed(6)}},
			Request{Logprobs: true, TopLogprobs: 20, Constraint: &stepConstraint{mod: 5, salt: 3, vocab: vocab}},
			Request{Logprobs: true, LogitBias: map[int32]float32{5: 3, 9: -100}, Sampling: SamplingParams{Temperature: 1, Seed: seed(7)}},
			Request{Sampling: SamplingParams{Temperature: 1, TopP: 0.8, Seed: seed(8)}},
			Request{MinTokens: 4, Logprobs: true, StopTokens: allBut(1000, 1010, vocab), Sampling: SamplingParams{Temperature: 0.7, TopK: 10, Seed: seed(9)}},
		)
	}
	for i := range reqs {
		reqs[i].Prompt = prompt(5+i%4, int32(i), vocab)
		reqs[i].MaxTokens = 14
	}
	return reqs
}

// runDev loads a fresh tiny model on be, runs reqs through an engine on it
// (hostOnly: hidden behind hostModel) and returns each output, its logprobs
// and the steps' traffic.
func runDev(t *testing.T, be *cuda.Backend, path string, reqs []Request, hostOnly bool) ([][]int32, [][]*Logprob, []stepCopy) {
	t.Helper()
	src, err := models.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	const blocks, bs = 64, 16
	llama, err := models.Load(src, be, models.Options{KVBlocks: blocks, BlockSize: bs, MaxBatchTokens: 128, MaxSeqs: 16})
	if err != nil {
		t.Fatal(err)
	}
	m := &devModel{Llama: llama, be: be, first: true, held: make(chan struct{}), release: make(chan struct{})}
	var model Model = m
	if hostOnly {
		model = hostModel{m}
	}
	e, err := New(model, Config{Blocks: blocks, BlockSize: bs, MaxSeqs: 16, MaxBatchTokens: 128, EOG: []int32{2}})
	if err != nil {
		t.Fatal(err)
	}
	if (e.dev != nil) == hostOnly {
		t.Fatalf("device sampling %v, want %v", e.dev != nil, !hostOnly)
	}
	seqs := []*Sequence{submit(t, e, reqs[0])}
	<-m.held
	for _, r := range reqs[1:] {
		seqs = append(seqs, submit(t, e, r))
	}
	close(m.release)
	out, lps := make([][]int32, len(seqs)), make([][]*Logprob, len(seqs))
	for i, s := range seqs {
		for tok := range s.Tokens() {
			out[i] = append(out[i], tok.ID)
			if tok.Logprob != nil {
				lps[i] = append(lps[i], tok.Logprob)
			}
		}
		if r := s.Result(); r.Err != nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
	}
	if err := e.Close(bg); err != nil {
		t.Fatal(err)
	}
	st := e.Stats()
	if st.KV.Used != 0 {
		t.Errorf("KV blocks leaked: %d of %d in use", st.KV.Used, st.KV.Total)
	}
	// The metrics' byte counter: the backend's, and only on the device path.
	if st.DeviceToHost == hostOnly || hostOnly && st.DeviceToHostBytes != 0 || !hostOnly && st.DeviceToHostBytes != be.DeviceToHostBytes() {
		t.Errorf("Stats: DeviceToHost %v, %d bytes; backend copied %d (host path %v)", st.DeviceToHost, st.DeviceToHostBytes, be.DeviceToHostBytes(), hostOnly)
	}
	return out, lps, m.close()
}

// TestDeviceSamplingInEngine: the engine's device path (the CUDA backend on
// the emulator: constraint masks applied there, tokens sampled there, the
// logits of host-only rows read back alone) gives every request the tokens
// and logprobs the host path gives over whole generations, and each step
// copies to the host 4 bytes per device-sampled row plus one logits row per
// host row — only the ids when no row needs its logits.
func TestDeviceSamplingInEngine(t *testing.T) {
	be, err := cuda.New(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	spec := tinySpec
	spec.Vocab = devVocab
	if err := modeltest.WriteGGUF(path, spec, kernels.Q8_0); err != nil {
		t.Fatal(err)
	}
	const rowBytes = 4 * devVocab
	for _, mixed := range []bool{false, true} {
		reqs := devRequests(devVocab, mixed)
		want, wantLP, hostSteps := runDev(t, be, path, reqs, true)
		got, gotLP, devSteps := runDev(t, be, path, devRequests(devVocab, mixed), false)
		stopped := 0
		for i := range reqs {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("mixed %v, request %d (%+v): device path %v, host path %v", mixed, i, reqs[i].Sampling, got[i], want[i])
			}
			if len(gotLP[i]) != len(wantLP[i]) || len(gotLP[i]) != len(got[i])*btoi(reqs[i].Logprobs) {
				t.Errorf("mixed %v, request %d: %d logprobs on the device path, %d on the host's, for %d tokens", mixed, i, len(gotLP[i]), len(wantLP[i]), len(got[i]))
			}
			for k := range min(len(gotLP[i]), len(wantLP[i])) {
				if !sameLogprob(gotLP[i][k], wantLP[i][k]) {
					t.Errorf("mixed %v, request %d, token %d: logprobs %+v on the device path, %+v on the host's", mixed, i, k, *gotLP[i][k], *wantLP[i][k])
				}
			}
			if n := reqs[i].MinTokens; n > 0 && len(got[i]) < n {
				t.Errorf("request %d: %d tokens %v, under min_tokens %d", i, len(got[i]), got[i], n)
			} else if n > 0 && len(got[i]) < reqs[i].MaxTokens {
				stopped++ // the stops were live: min_tokens held them off
			}
			if c, ok := reqs[i].Constraint.(*stepConstraint); ok && len(c.committed) == 0 {
				t.Errorf("request %d: its constraint was never committed", i)
			}
		}
		if stopped == 0 {
			t.Errorf("mixed %v: no min_tokens request stopped before max_tokens: their stops never bit", mixed)
		}
		var rows, read, lpRows, hostBytes, devBytes int64
		for _, s := range hostSteps {
			if want := int64(s.rows) * rowBytes; s.bytes != want {
				t.Errorf("host path: a step of %d logit rows copied %d bytes, want %d", s.rows, s.bytes, want)
			}
			hostBytes += s.bytes
		}
		for i, s := range devSteps {
			if s.sampled != 0 && s.sampled != s.rows {
				t.Errorf("device path, step %d: %d rows sampled of %d", i, s.sampled, s.rows)
			}
			want := int64(4*s.sampled) + int64(4*41*s.logprobs) + int64(s.read)*rowBytes // 41 int32 a logprobs row (logprobs.cu)
			if s.bytes != want {
				t.Errorf("device path, step %d (%+v): %d bytes copied, want %d", i, s, s.bytes, want)
			}
			if !mixed && (s.read != 0 || s.bytes != int64(4*s.rows)) {
				t.Errorf("device path, step %d (%+v): no row needs its logits, yet more than the ids came back", i, s)
			}
			rows, read, lpRows, devBytes = rows+int64(s.rows), read+int64(s.read), lpRows+int64(s.logprobs), devBytes+s.bytes
		}
		t.Logf("mixed %v: %d logit rows over %d steps; host path copied %d bytes, device path %d (%d rows read back, %d logprobs rows on the device)",
			mixed, rows, len(devSteps), hostBytes, devBytes, read, lpRows)
		if mixed && lpRows == 0 {
			t.Error("no logprobs were computed on the device")
		}
		if mixed && (read == 0 || read >= rows) {
			t.Errorf("%d of %d rows read back: want some (Undecided or host-only), not all", read, rows)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sameLogprob: the device's log_softmax sums in another order than the
// host's (logprobs.cu: within 2e-6 of it), so values agree to 1e-5 and the
// alternatives are the same tokens in the same order.
func sameLogprob(a, b *Logprob) bool {
	near := func(x, y float32) bool { return math.Abs(float64(x-y)) <= 1e-5 }
	if !near(a.Logprob, b.Logprob) || len(a.Top) != len(b.Top) {
		return false
	}
	for i := range a.Top {
		if a.Top[i].ID != b.Top[i].ID || !near(a.Top[i].Logprob, b.Top[i].Logprob) {
			return false
		}
	}
	return true
}

// allBut is every id below vocab outside [lo, hi).
func allBut(lo, hi, vocab int) []int32 {
	var ids []int32
	for i := range vocab {
		if i < lo || i >= hi {
			ids = append(ids, int32(i))
		}
	}
	return ids
}
