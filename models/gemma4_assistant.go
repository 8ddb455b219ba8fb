package models

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// A Gemma 4 assistant (GGUF architecture gemma4-assistant, Hugging Face
// Gemma4AssistantForCausalLM) is a small drafter that runs on its target's
// state, as llama.cpp v0.5.0's gemma4-assistant graph and its draft-mtp
// driver with shared memory run it:
//
//	input: the target's embedding of the token, × √(target hidden),
//	  beside a target-sized hidden row h (the first draft: the target's
//	  final hidden, after its output norm, at the position before the
//	  token's; each next draft: the assistant's own h_next), through
//	  nextn.pre_projection to the assistant's width;
//	layers (nextn_predict_layers of them, window or global as the
//	  sliding-window pattern says): Gemma 4's block with a query and no
//	  key or value: Q is QK-normed and rotated (window layers at
//	  rope.freq_base_swa, global ones proportionally through rope_freqs)
//	  and attends, unscaled, over the target's own K/V of the same kind
//	  (its last window layer's or last global layer's store, llama.cpp's
//	  share callback) without writing a row; GeGLU feed-forward, post
//	  norms, the layer's output scale;
//	output: the output norm, then tied logits (no soft-cap) and
//	  h_next = nextn.post_projection · (that normed row).
//
// Every draft of one pass sits at the same position p (llama.cpp's note:
// the assistant has no K/V of its own, so a later draft does not see an
// earlier one except through h), and reads the target's positions below p,
// those the target has verified, with the window counting p itself: a
// window of W reads (p−W, p−1].
//
// The token_embd rows are the assistant's own (its logits); its input
// embedding is the target's. The masked-embedding centroids and ordering
// some files carry are not used, as llama.cpp loads and never runs them.

// Gemma4AssistantConfig is a gemma4-assistant file's shape.
type Gemma4AssistantConfig struct {
	Hidden     int // the assistant's width
	Backbone   int // embedding_length_out: the target's hidden size
	Layers     int
	Heads      int
	HeadDim    int // global layers' head size (attention.key_length)
	HeadDimSWA int // window layers' (attention.key_length_swa)
	Vocab      int
	FFN        []int  // [Layers] feed-forward widths
	Window     int    // attention.sliding_window
	WindowLyr  []bool // [Layers] window layers
	KVHeads    []int  // [Layers] the target's KV heads each layer reads, where the file says; nil: not said
	RMSEps     float32
	RopeTheta  float32 // global layers' base, before rope_freqs' divisors
	RopeSWA    float32 // window layers'
}

const gemma4AssistantArch = "gemma4-assistant"

// IsGemma4Assistant reports whether src is a Gemma 4 assistant drafter,
// which runs only beside its target (LoadGemma4Assistant).
func IsGemma4Assistant(src WeightSource) bool {
	switch s := src.(type) {
	case *GGUFFile:
		arch, _ := s.String("general.architecture")
		return arch == gemma4AssistantArch
	case *HFDir:
		return hfArchitecture(s.dir) == hfAssistantArch
	}
	return false
}

// gemma4AssistantConfig reads the gemma4-assistant.* keys.
func gemma4AssistantConfig(g *GGUFFile) (Gemma4AssistantConfig, error) {
	m := metaReader{g: g, prefix: gemma4AssistantArch + "."}
	c := Gemma4AssistantConfig{
		Hidden:     m.int("embedding_length"),
		Backbone:   m.int("embedding_length_out"),
		Layers:     m.int("block_count"),
		Heads:      m.int("attention.head_count"),
		HeadDim:    m.int("attention.key_length"),
		HeadDimSWA: m.int("attention.key_length_swa"),
		Window:     m.int("attention.sliding_window"),
		RMSEps:     m.float("attention.layer_norm_rms_epsilon"),
		RopeTheta:  m.floatOr("rope.freq_base", 10000),
		RopeSWA:    m.floatOr("rope.freq_base_swa", gemma4RopeThetaLocal),
	}
	nextn := m.intOr("nextn_predict_layers", c.Layers)
	vFull := m.intOr("attention.value_length", c.HeadDim)
	vSWA := m.intOr("attention.value_length_swa", c.HeadDimSWA)
	rotFull := m.intOr("rope.dimension_count", c.HeadDim)
	rotSWA := m.intOr("rope.dimension_count_swa", c.HeadDimSWA)
	if m.err != nil {
		return c, m.err
	}
	path := g.path
	switch {
	case nextn != c.Layers:
		return c, fmt.Errorf("gguf %s: %d assistant layers of %d blocks (llama.cpp runs nextn_predict_layers = block_count): %w", path, nextn, c.Layers, ErrUnsupported)
	case vFull != c.HeadDim || vSWA != c.HeadDimSWA:
		return c, fmt.Errorf("gguf %s: gemma4-assistant value lengths %d/%d differ from key lengths %d/%d: %w", path, vFull, vSWA, c.HeadDim, c.HeadDimSWA, ErrMalformed)
	case rotFull != c.HeadDim || rotSWA != c.HeadDimSWA:
		return c, fmt.Errorf("gguf %s: gemma4-assistant rotary dims %d/%d of heads %d/%d: %w", path, rotFull, rotSWA, c.HeadDim, c.HeadDimSWA, ErrUnsupported)
	case c.Layers <= 0 || c.Heads <= 0 || c.Hidden <= 0 || c.HeadDim <= 0 || c.HeadDimSWA <= 0 || c.HeadDim%2 != 0 || c.HeadDimSWA%2 != 0:
		return c, fmt.Errorf("gguf %s: gemma4-assistant shape %d layers, %d heads of %d/%d, width %d: %w", path, c.Layers, c.Heads, c.HeadDim, c.HeadDimSWA, c.Hidden, ErrMalformed)
	case c.Backbone == c.Hidden:
		// llama.cpp refuses it too: without it the file does not say the
		// target's width.
		return c, fmt.Errorf("gguf %s: embedding_length_out must carry the target's hidden size (it equals the assistant's, %d): %w", path, c.Hidden, ErrMalformed)
	case c.Window < 2:
		return c, fmt.Errorf("gguf %s: gemma4-assistant window %d: %w", path, c.Window, ErrMalformed)
	}
	key := m.prefix + "attention.sliding_window_pattern"
	pattern, ok := g.meta[key].([]bool)
	if !ok || len(pattern) != c.Layers {
		return c, fmt.Errorf("gguf %s: %s must be a bool per layer (%d): %w", path, key, c.Layers, ErrMalformed)
	}
	c.WindowLyr = append([]bool(nil), pattern...)
	key = m.prefix + "feed_forward_length"
	c.FFN = make([]int, c.Layers)
	if n, ok := g.Uint(key); ok && n > 0 && n <= math.MaxInt32 {
		for i := range c.FFN {
			c.FFN[i] = int(n)
		}
	} else if w, ok := g.Int32s(key); ok && len(w) == c.Layers {
		for i, f := range w {
			if f <= 0 {
				return c, fmt.Errorf("gguf %s: %s[%d] = %d: %w", path, key, i, f, ErrMalformed)
			}
			c.FFN[i] = int(f)
		}
	} else {
		return c, fmt.Errorf("gguf %s: %s must be a number or one per layer (%d): %w", path, key, c.Layers, ErrMalformed)
	}
	key = m.prefix + "attention.head_count_kv"
	if n, ok := g.Uint(key); ok {
		c.KVHeads = make([]int, c.Layers)
		for i := range c.KVHeads {
			c.KVHeads[i] = int(min(n, math.MaxInt32))
		}
	} else if per, ok := g.Int32s(key); ok && len(per) == c.Layers {
		for _, n := range per {
			c.KVHeads = append(c.KVHeads, int(n))
		}
	} else if _, present := g.meta[key]; present {
		return c, fmt.Errorf("gguf %s: %s must be a number or one per layer (%d): %w", path, key, c.Layers, ErrMalformed)
	}
	c.Vocab = m.intOr("vocab_size", 0)
	if c.Vocab == 0 {
		c.Vocab = g.vocabFallback()
	}
	return c, m.err
}

// headDim is layer i's head size.
func (c Gemma4AssistantConfig) headDim(i int) int {
	if c.WindowLyr[i] {
		return c.HeadDimSWA
	}
	return c.HeadDim
}

type gemma4AssistantLayer struct {
	attnNorm, wq, qNorm, wo, postAttnNorm kernels.Tensor
	ffnNorm, wGate, wUp, wDown, postFFN   kernels.Tensor
	outScale                              float32
}

// gemma4AssistantKind is what one layer kind (window or global) reads and
// its scratch: the target's store and layer, the RoPE frequencies, Q and
// the attention output at that kind's head size.
type gemma4AssistantKind struct {
	kv      kernels.KVStore
	layer   int
	freq    kernels.Tensor
	q, att  kernels.Tensor
	window  int // QueryAttention's window: the assistant's less its own position; 0 for global
	present bool
}

// Gemma4Assistant is a loaded Gemma 4 assistant bound to its target, whose
// embeddings and KV stores it reads.
type Gemma4Assistant struct {
	cfg     Gemma4AssistantConfig
	target  *Llama
	be      kernels.Backend
	ops     kernels.GemmaOps
	qa      kernels.QueryAttentionOps
	maxRows int

	embd, outNorm kernels.Tensor // [vocab, hidden] (the logits), [hidden]
	preX, preH    kernels.Tensor // pre_projection's columns for the target embedding and for h: [hidden, backbone] each
	post          kernels.Tensor // [backbone, hidden]
	layers        []gemma4AssistantLayer
	kind          [2]gemma4AssistantKind // [0] global, [1] window

	emb, hin, x, h, o, logits, hNext kernels.Tensor
	ffn                              map[int][2]kernels.Tensor // gate and up scratch by width
	host                             []float32
	attnBatch                        kernels.Batch // the batch as attention reads it: positions one back
	sqrtBackbone                     float32
}

// LoadGemma4Assistant loads the assistant in src to draft for target, for
// up to maxRows draft rows a forward. It refuses an assistant made for
// another target: the target must be a Gemma 4 of the assistant's
// embedding_length_out, vocabulary and head sizes, whose K/V the assistant
// can read (one store per layer kind, window layers not in a store of
// their own blocks).
func LoadGemma4Assistant(src WeightSource, target *Llama, maxRows int) (*Gemma4Assistant, error) {
	if !IsGemma4Assistant(src) {
		return nil, fmt.Errorf("%s: not a Gemma 4 assistant (GGUF %s, Hugging Face %s): %w", src.Path(), gemma4AssistantArch, hfAssistantArch, ErrUnsupported)
	}
	var c Gemma4AssistantConfig
	var err error
	if h, ok := src.(*HFDir); ok {
		c, err = gemma4AssistantHFConfig(h)
		src = hfAssistant{h}
	} else {
		c, err = gemma4AssistantConfig(src.(*GGUFFile))
	}
	if err != nil {
		return nil, err
	}
	if err := checkAssistantTarget(c, target, src.Path()); err != nil {
		return nil, err
	}
	if maxRows <= 0 {
		return nil, fmt.Errorf("%s: assistant rows %d", src.Path(), maxRows)
	}
	be, ok := target.be, false
	a := &Gemma4Assistant{cfg: c, target: target, be: be, maxRows: maxRows,
		sqrtBackbone: float32(math.Sqrt(float64(c.Backbone)))}
	if a.ops, ok = be.(kernels.GemmaOps); !ok {
		return nil, fmt.Errorf("%s: the %s backend lacks the Gemma kernels: %w", src.Path(), be.Name(), ErrUnsupported)
	}
	if a.qa, ok = be.(kernels.QueryAttentionOps); !ok {
		return nil, fmt.Errorf("%s: the %s backend lacks QueryAttention (attention over the target's K/V without writing it): %w", src.Path(), be.Name(), ErrUnsupported)
	}
	w := weightLoader{src: src, be: be}
	a.embd = w.load("token_embd.weight", c.Vocab, c.Hidden)
	a.outNorm = w.loadF32("output_norm.weight", c.Hidden)
	a.post = w.load("nextn.post_projection.weight", c.Backbone, c.Hidden)
	if pre, ok := w.get("nextn.pre_projection.weight", c.Hidden, 2*c.Backbone); ok {
		a.preX, a.preH, err = splitColumns(be, pre, c.Backbone)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Path(), err)
		}
	}
	a.layers = make([]gemma4AssistantLayer, c.Layers)
	for i := range a.layers {
		l, p, hd := &a.layers[i], fmt.Sprintf("blk.%d.", i), c.headDim(i)
		l.attnNorm = w.loadF32(p+"attn_norm.weight", c.Hidden)
		l.wq = w.load(p+"attn_q.weight", c.Heads*hd, c.Hidden)
		l.qNorm = w.loadF32(p+"attn_q_norm.weight", hd)
		l.wo = w.load(p+"attn_output.weight", c.Hidden, c.Heads*hd)
		l.postAttnNorm = w.loadF32(p+"post_attention_norm.weight", c.Hidden)
		l.ffnNorm = w.loadF32(p+"ffn_norm.weight", c.Hidden)
		l.wGate = w.load(p+"ffn_gate.weight", c.FFN[i], c.Hidden)
		l.wUp = w.load(p+"ffn_up.weight", c.FFN[i], c.Hidden)
		l.wDown = w.load(p+"ffn_down.weight", c.Hidden, c.FFN[i])
		l.postFFN = w.loadF32(p+"post_ffw_norm.weight", c.Hidden)
		if t, ok := w.get(p+"layer_output_scale.weight", 1); ok {
			v := make([]float32, 1)
			if err := quant.Dequantize(t.DType, t.Data, v); err != nil {
				return nil, fmt.Errorf("%s: tensor %s: %w", src.Path(), t.Name, err)
			}
			l.outScale = v[0]
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	if err := a.loadKinds(&w); err != nil {
		return nil, err
	}
	if err := a.allocate(); err != nil {
		return nil, err
	}
	return a, nil
}

// checkAssistantTarget refuses a target the assistant was not made for.
func checkAssistantTarget(c Gemma4AssistantConfig, t *Llama, path string) error {
	tc := t.cfg
	if tc.Arch != "gemma4" || t.gemma4 == nil {
		return fmt.Errorf("%s: a Gemma 4 assistant drafts for a Gemma 4 target, not %s: %w", path, tc.Arch, ErrUnsupported)
	}
	switch {
	case c.Backbone != tc.Hidden:
		return fmt.Errorf("%s: the assistant is for a target of hidden size %d (embedding_length_out), this target's is %d: %w", path, c.Backbone, tc.Hidden, ErrUnsupported)
	case c.Vocab != tc.Vocab:
		return fmt.Errorf("%s: the assistant's vocabulary is %d, the target's %d: %w", path, c.Vocab, tc.Vocab, ErrUnsupported)
	case t.win != nil && t.win.own:
		return fmt.Errorf("%s: the target keeps its window layers' K/V in blocks of their own (WindowKV), which the assistant cannot read: %w", path, ErrUnsupported)
	case tc.Layers < 2:
		return fmt.Errorf("%s: a target of %d layers: %w", path, tc.Layers, ErrUnsupported)
	}
	for i, win := range c.WindowLyr {
		src := tc.Layers - 1 // llama.cpp's share: window layers read the target's layer L−2, global ones L−1
		hd, what := tc.HeadDim, "global"
		if win {
			src, hd, what = tc.Layers-2, tc.windowHeadDim(), "window"
		}
		if tc.IsWindowLayer(src) != win {
			return fmt.Errorf("%s: assistant layer %d (%s) reads target layer %d, which is not a %s layer: %w", path, i, what, src, what, ErrUnsupported)
		}
		if c.headDim(i) != hd {
			return fmt.Errorf("%s: assistant %s heads of %d, the target's %d: %w", path, what, c.headDim(i), hd, ErrUnsupported)
		}
		kvh := tc.LayerKVHeads(src)
		if c.Heads%kvh != 0 {
			return fmt.Errorf("%s: %d assistant heads over the target's %d %s KV heads: %w", path, c.Heads, kvh, what, ErrUnsupported)
		}
		if c.KVHeads != nil && c.KVHeads[i] != kvh {
			// llama.cpp views the shared cache with the assistant's own count.
			return fmt.Errorf("%s: assistant layer %d reads %d KV heads, the target's %s layers have %d: %w", path, i, c.KVHeads[i], what, kvh, ErrUnsupported)
		}
	}
	return nil
}

// splitColumns cuts a [rows, 2·half] weight into its first and last half
// columns, so that W·[x; h] runs as W_x·x + W_h·h without a concatenation.
func splitColumns(be kernels.Backend, t kernels.HostTensor, half int) (kernels.Tensor, kernels.Tensor, error) {
	if half%t.DType.BlockElems() != 0 {
		return nil, nil, fmt.Errorf("tensor %s: %d columns are not a whole number of %v blocks", t.Name, half, t.DType)
	}
	rows, rb, hb := t.Shape[0], t.DType.RowBytes(2*half), t.DType.RowBytes(half)
	x, h := make([]byte, 0, rows*hb), make([]byte, 0, rows*hb)
	for r := range rows {
		row := t.Data[r*rb : (r+1)*rb]
		x, h = append(x, row[:hb]...), append(h, row[hb:]...)
	}
	tx, err := be.Upload(kernels.HostTensor{Name: t.Name + "[x]", DType: t.DType, Shape: []int{rows, half}, Data: x})
	if err != nil {
		return nil, nil, err
	}
	th, err := be.Upload(kernels.HostTensor{Name: t.Name + "[h]", DType: t.DType, Shape: []int{rows, half}, Data: h})
	return tx, th, err
}

// loadKinds binds each layer kind the assistant has to the target's store
// and builds its RoPE frequencies.
func (a *Gemma4Assistant) loadKinds(w *weightLoader) error {
	c, tc := a.cfg, a.target.cfg
	var err error
	for i, win := range c.WindowLyr {
		k := &a.kind[0]
		if win {
			k = &a.kind[1]
		}
		if k.present {
			continue
		}
		k.present = true
		src, rc := tc.Layers-1, Config{HeadDim: c.HeadDim, RopeTheta: c.RopeTheta}
		if win {
			src, rc = tc.Layers-2, Config{HeadDim: c.HeadDimSWA, RopeTheta: c.RopeSWA}
			k.window = c.Window - 1
		}
		k.kv, k.layer, _ = a.target.layerKV(tc.KVSource(src), nil)
		freqs := ropeFrequencies(rc)
		if !win {
			// Proportional RoPE: the divisors llama.cpp requires of a
			// file with a global layer.
			w.loadF32("rope_freqs.weight", c.HeadDim/2)
			for j, div := range w.host["rope_freqs.weight"] {
				freqs[j] /= div
			}
			if w.err != nil {
				return w.err
			}
		}
		hd := c.headDim(i)
		if kc := k.kv.Config(); kc.HeadDim != hd {
			return fmt.Errorf("%s: the target's store for assistant layer %d has heads of %d, want %d: %w", w.src.Path(), i, kc.HeadDim, hd, ErrUnsupported)
		}
		up := func(name string, v []float32) kernels.Tensor {
			var t kernels.Tensor
			if err == nil {
				t, err = a.be.Upload(f32Host(name, v))
			}
			return t
		}
		alloc := func(shape ...int) kernels.Tensor {
			var t kernels.Tensor
			if err == nil {
				t, err = a.be.Alloc(shape...)
			}
			return t
		}
		k.freq = up(fmt.Sprintf("assistant.inv_freq.%d", i), freqs)
		k.q, k.att = alloc(a.maxRows, c.Heads*hd), alloc(a.maxRows, c.Heads*hd)
	}
	return err
}

func (a *Gemma4Assistant) allocate() error {
	c, n := a.cfg, a.maxRows
	var err error
	alloc := func(shape ...int) kernels.Tensor {
		var t kernels.Tensor
		if err == nil {
			t, err = a.be.Alloc(shape...)
		}
		return t
	}
	a.emb, a.hin = alloc(n, c.Backbone), alloc(n, c.Backbone)
	a.x, a.h, a.o = alloc(n, c.Hidden), alloc(n, c.Hidden), alloc(n, c.Hidden)
	a.logits, a.hNext = alloc(n, c.Vocab), alloc(n, c.Backbone)
	a.ffn = map[int][2]kernels.Tensor{}
	for _, f := range c.FFN {
		if _, ok := a.ffn[f]; !ok {
			a.ffn[f] = [2]kernels.Tensor{alloc(n, f), alloc(n, f)}
		}
	}
	a.host = make([]float32, n*c.Vocab)
	return err
}

// Config is the assistant's shape.
func (a *Gemma4Assistant) Config() Gemma4AssistantConfig { return a.cfg }

// VocabSize is the assistant's (and its target's) vocabulary.
func (a *Gemma4Assistant) VocabSize() int { return a.cfg.Vocab }

// MaxRows is the most rows one Forward takes.
func (a *Gemma4Assistant) MaxRows() int { return a.maxRows }

// Forward runs one draft step: row r is token b.Tokens[r] at position
// b.Positions[r] with hidden row hRows[r]: with fromTarget, row hRows[r]
// of the target's last forward batch, normed by the target's output norm
// as its logits are (its residual stream stays the target's until its next
// forward, whatever else reads its logits); else the h_next of row
// hRows[r] of the previous call. Each sequence's Blocks are its table in
// the target's KV and its ContextLen the position its rows sit at (they
// read the positions below it). Nothing is written to the target's K/V.
// It returns the rows' logits ([n, vocab], valid until the next call) and
// keeps their h_next for the next call.
func (a *Gemma4Assistant) Forward(b *kernels.Batch, fromTarget bool, hRows []int32) ([]float32, error) {
	c, be, ops := &a.cfg, a.be, a.ops
	n := len(b.Tokens)
	if n == 0 || n > a.maxRows || len(b.Positions) != n || len(hRows) != n {
		return nil, fmt.Errorf("gemma4 assistant: %d rows (%d positions, %d hidden rows), limit %d", n, len(b.Positions), len(hRows), a.maxRows)
	}
	for _, t := range b.Tokens {
		if t < 0 || int(t) >= c.Vocab {
			return nil, fmt.Errorf("gemma4 assistant: token id %d outside the vocabulary of %d", t, c.Vocab)
		}
	}
	ab := &a.attnBatch
	ab.Tokens, ab.Positions, ab.Slots, ab.Seqs = b.Tokens, ab.Positions[:0], nil, b.Seqs
	for _, sq := range b.Seqs {
		if sq.Start < 0 || sq.End > n || sq.Start > sq.End {
			return nil, fmt.Errorf("gemma4 assistant: sequence rows [%d,%d) outside the batch of %d", sq.Start, sq.End, n)
		}
		for r := sq.Start; r < sq.End; r++ {
			if p := int(b.Positions[r]); p < 1 || p != sq.ContextLen {
				return nil, fmt.Errorf("gemma4 assistant: row %d at position %d of a sequence whose target K/V holds %d positions (a draft sits just past them)", r, p, sq.ContextLen)
			}
		}
	}
	for _, p := range b.Positions {
		// The kernel reads (q−window, q] at q; the draft's own position
		// has no K/V, so q is one back and the window one shorter.
		ab.Positions = append(ab.Positions, p-1)
	}
	err := firstErr(
		be.GetRows(a.emb, a.target.tokEmbd, b.Tokens),
		ops.Scale(a.emb, n, a.sqrtBackbone),
		a.hiddenIn(fromTarget, hRows, n),
		be.MatMul(a.x, a.emb, a.preX, nil, n),
		be.MatMul(a.o, a.hin, a.preH, nil, n),
		be.Add(a.x, a.o, n),
	)
	for i := range a.layers {
		if err != nil {
			break
		}
		l, k := &a.layers[i], &a.kind[0]
		if c.WindowLyr[i] {
			k = &a.kind[1]
		}
		f := a.ffn[c.FFN[i]]
		err = firstErr(
			be.RMSNorm(a.h, a.x, l.attnNorm, n, c.RMSEps),
			be.MatMul(k.q, a.h, l.wq, nil, n),
			ops.HeadRMSNorm(k.q, l.qNorm, n, c.Heads, c.RMSEps),
			be.RoPE(k.q, k.freq, b.Positions, c.Heads, kernels.RoPEHalves),
			a.qa.QueryAttention(k.att, k.q, k.kv, k.layer, ab, 1, k.window),
			be.MatMul(a.o, k.att, l.wo, nil, n),
			be.RMSNorm(a.o, a.o, l.postAttnNorm, n, c.RMSEps),
			be.Add(a.x, a.o, n),
			be.RMSNorm(a.h, a.x, l.ffnNorm, n, c.RMSEps),
			be.MatMul(f[0], a.h, l.wGate, nil, n),
			be.MatMul(f[1], a.h, l.wUp, nil, n),
			ops.GeGLU(f[0], f[0], f[1], n),
			be.MatMul(a.o, f[0], l.wDown, nil, n),
			be.RMSNorm(a.o, a.o, l.postFFN, n, c.RMSEps),
			be.Add(a.x, a.o, n),
			ops.Scale(a.x, n, l.outScale),
		)
	}
	ab.Tokens, ab.Seqs = nil, nil // do not pin the caller's slices
	if err == nil {
		err = firstErr(
			be.RMSNorm(a.x, a.x, a.outNorm, n, c.RMSEps),
			be.MatMul(a.logits, a.x, a.embd, nil, n),
			be.MatMul(a.hNext, a.x, a.post, nil, n),
			be.Read(a.logits, a.host[:n*c.Vocab]),
		)
	}
	if err != nil {
		return nil, fmt.Errorf("gemma4 assistant forward: %w", err)
	}
	return a.host[:n*c.Vocab], nil
}

// hiddenIn gathers the rows' h into a.hin.
func (a *Gemma4Assistant) hiddenIn(fromTarget bool, rows []int32, n int) error {
	if !fromTarget {
		return a.be.GetRows(a.hin, a.hNext, rows)
	}
	t := a.target
	for _, r := range rows {
		if r < 0 || int(r) >= t.opts.MaxBatchTokens {
			return fmt.Errorf("target row %d outside its batch of %d", r, t.opts.MaxBatchTokens)
		}
	}
	return firstErr(
		a.be.GetRows(a.hin, t.x, rows),
		a.be.RMSNorm(a.hin, a.hin, t.outNorm, n, t.cfg.RMSEps),
	)
}
