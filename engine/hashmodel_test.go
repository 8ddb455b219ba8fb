package engine

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// hashModel is a tiny deterministic language model whose "attention" really
// goes through the paged KV cache. Each row's KV is a hash of its token, its
// position and the KV of the previous position, read back from the cache
// through the block table; a row's logits hash the KV of its whole context,
// again read through the block table. So every output token depends on every
// KV slot of its sequence: a block freed too early, shared wrongly, reused
// without being rewritten or indexed at the wrong slot changes the output.
// reference computes the same function with no cache at all.
type hashModel struct {
	vocab, ctx, bs int
	kv             []uint64 // the KV store: [blocks*bs] slots
	logits         []float32
	forwards       int
	// onForward, when set, runs at the start of each Forward, on the engine
	// loop goroutine (so it may read loop-owned state); an error fails the step.
	onForward func(b *kernels.Batch) error
}

func newHashModel(vocab, ctx, blocks, bs int) *hashModel {
	return &hashModel{vocab: vocab, ctx: ctx, bs: bs, kv: make([]uint64, blocks*bs)}
}

func (m *hashModel) VocabSize() int  { return m.vocab }
func (m *hashModel) ContextLen() int { return m.ctx }

func kvOf(prev uint64, tok int32, pos int) uint64 {
	return mix(prev ^ uint64(uint32(tok)) ^ uint64(pos)<<32)
}

func mix(x uint64) uint64 {
	x ^= x >> 31
	x *= 0x7fb5d329728ea185
	x ^= x >> 27
	x *= 0x81dadef4bc2dd44d
	x ^= x >> 33
	return x
}

const kvRoot = 0x1234567

// logitsOf fills out with logits in [0, 8), a hash of the context's KV.
func (m *hashModel) logitsOf(h uint64, out []float32) {
	for v := range out {
		out[v] = float32(mix(h+uint64(v))>>40) / (1 << 24) * 8
	}
}

func (m *hashModel) Forward(b *kernels.Batch) ([]float32, error) {
	m.forwards++
	if m.onForward != nil {
		if err := m.onForward(b); err != nil {
			return nil, err
		}
	}
	slot := func(blocks []int32, pos int) int {
		return int(blocks[pos/m.bs])*m.bs + pos%m.bs
	}
	m.logits = m.logits[:0]
	rows := 0
	for _, sr := range b.Seqs {
		if sr.Start != rows || sr.End <= sr.Start || int(b.Positions[sr.End-1])+1 != sr.ContextLen {
			return nil, fmt.Errorf("hashModel: malformed rows %+v", sr)
		}
		rows = sr.End
		for r := sr.Start; r < sr.End; r++ {
			pos := int(b.Positions[r])
			if int(b.Slots[r]) != slot(sr.Blocks, pos) {
				return nil, fmt.Errorf("hashModel: row %d slot %d, table says %d", r, b.Slots[r], slot(sr.Blocks, pos))
			}
			prev := uint64(kvRoot)
			if pos > 0 {
				prev = m.kv[slot(sr.Blocks, pos-1)]
			}
			m.kv[b.Slots[r]] = kvOf(prev, b.Tokens[r], pos)
		}
	}
	for _, r := range b.LogitRows {
		var sr kernels.SeqRows
		for _, s := range b.Seqs {
			if int(r) >= s.Start && int(r) < s.End {
				sr = s
			}
		}
		var h uint64
		for pos := 0; pos <= int(b.Positions[r]); pos++ {
			h = mix(h ^ m.kv[slot(sr.Blocks, pos)])
		}
		m.logits = append(m.logits, make([]float32, m.vocab)...)
		m.logitsOf(h, m.logits[len(m.logits)-m.vocab:])
	}
	return m.logits, nil
}

// reference is greedy generation of n tokens without any cache, stopping
// after a token in stop (which is included).
func (m *hashModel) reference(prompt []int32, n int, stop ...int32) []int32 {
	toks := append([]int32(nil), prompt...)
	kv := make([]uint64, 0, len(prompt)+n)
	logits := make([]float32, m.vocab)
	var out []int32
	for len(out) < n {
		for pos := len(kv); pos < len(toks); pos++ {
			prev := uint64(kvRoot)
			if pos > 0 {
				prev = kv[pos-1]
			}
			kv = append(kv, kvOf(prev, toks[pos], pos))
		}
		var h uint64
		for _, k := range kv {
			h = mix(h ^ k)
		}
		m.logitsOf(h, logits)
		tok := argmax(logits)
		out = append(out, tok)
		toks = append(toks, tok)
		for _, s := range stop {
			if tok == s {
				return out
			}
		}
	}
	return out
}

// collect drains a sequence: its tokens (checking indices) and result.
func collect(t testing.TB, s *Sequence, firstIndex int) ([]int32, Result) {
	t.Helper()
	var ids []int32
	for tok := range s.Tokens() {
		if tok.Index != firstIndex+len(ids) {
			t.Errorf("token index %d, want %d", tok.Index, firstIndex+len(ids))
		}
		ids = append(ids, tok.ID)
	}
	return ids, s.Result()
}

func prompt(n int, salt int32, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((int(salt)*7 + i*13 + i*i) % vocab)
	}
	return p
}

// newTestEngine starts an engine over m's whole KV store (see newEngineOn).
func newTestEngine(t testing.TB, m *hashModel, cfg Config) *Engine {
	t.Helper()
	cfg.Blocks, cfg.BlockSize = len(m.kv)/m.bs, m.bs
	return newEngineOn(t, m, cfg)
}
