//go:build cuda || cudaemu

package cuda

import (
	"math"
	"slices"
	"testing"
)

// hostMask is the engine's host path (engine/constraint.go's apply): every
// logit whose bit is clear becomes −Inf.
func hostMask(row []float32, bits []uint32) {
	for i := range row {
		if bits[i/32]>>(i%32)&1 == 0 {
			row[i] = float32(math.Inf(-1))
		}
	}
}

// MaskLogits leaves exactly the host mask's logits, bit for bit, at vocab
// sizes that end mid-word, with rows that have a mask beside rows that do
// not (those keep their logits); the device sampler after it then picks,
// for a greedy row, the host's argmax of the masked row, never a
// disallowed token.
func TestMaskLogits(t *testing.T) {
	p := newPair(t)
	for _, vocab := range []int{1, 31, 33, 1000, 3001} {
		rows := 7
		words := (vocab + 31) / 32
		logits := p.randn(rows*vocab, 3)
		lt := p.scratch(logits, rows, vocab)
		masks := make([][]uint32, rows)
		want := slices.Clone(logits)
		for r := range rows {
			if r%3 == 1 {
				continue // unconstrained row
			}
			m := make([]uint32, words)
			for w := range m {
				m[w] = p.rand.Uint32() & p.rand.Uint32() // about a quarter allowed
			}
			if r == 0 {
				clear(m) // nothing but the last token: a grammar that only allows an end
				m[(vocab-1)/32] = 1 << ((vocab - 1) % 32)
			}
			if vocab%32 != 0 {
				m[words-1] |= ^uint32(0) << (vocab % 32) // junk past the vocabulary is ignored
			}
			masks[r] = m
			hostMask(want[r*vocab:(r+1)*vocab], m)
		}
		must(t, p.gpu.MaskLogits(lt.g, masks))
		got := make([]float32, rows*vocab)
		must(t, p.gpu.Read(lt.g, got))
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("vocab %d row %d token %d: device %v, host mask %v", vocab, i/vocab, i%vocab, got[i], want[i])
			}
		}

		// Masked again (the logits tensor now holds the masked rows, which
		// masking leaves as they are) and sampled greedily on the device.
		must(t, p.gpu.MaskLogits(lt.g, masks))
		toks := make([]int32, rows)
		must(t, p.gpu.Sample(lt.g, make([]SampleParams, rows), toks))
		for r, tok := range toks {
			row := want[r*vocab : (r+1)*vocab]
			if ref := refChain(row, SampleParams{}); tok != ref {
				t.Errorf("vocab %d row %d: device sampled %d after the mask, host %d", vocab, r, tok, ref)
			}
			if masks[r] != nil && masks[r][tok/32]>>(tok%32)&1 == 0 && !math.IsInf(float64(row[tok]), -1) {
				t.Errorf("vocab %d row %d: sampled disallowed token %d", vocab, r, tok)
			}
		}
		if toks[0] != int32(vocab-1) {
			t.Errorf("vocab %d: the only allowed token is %d, sampled %d", vocab, vocab-1, toks[0])
		}
	}
}

// A mask of the wrong length is refused, naming the row; all-nil masks
// record nothing.
func TestMaskLogitsErrors(t *testing.T) {
	p := newPair(t)
	lt := p.scratch(p.randn(2*100, 1), 2, 100)
	if err := p.gpu.MaskLogits(lt.g, [][]uint32{nil, make([]uint32, 3)}); err == nil {
		t.Error("a 3-word mask for 100 tokens was accepted")
	}
	if err := p.gpu.MaskLogits(lt.g, make([][]uint32, 3)); err == nil {
		t.Error("3 masks for 2 rows were accepted")
	}
	before := p.gpu.Launches()
	must(t, p.gpu.MaskLogits(lt.g, make([][]uint32, 2)), p.gpu.Sync())
	if n := p.gpu.Launches() - before; n != 0 {
		t.Errorf("no masks: %d launches", n)
	}
}
