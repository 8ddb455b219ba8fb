package models

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Options size what Load allocates on the backend.
type Options struct {
	MaxBatchTokens int // rows one Forward may carry (default 512)
	MaxSeqs        int // logit rows one Forward may ask for (default 64)
	BlockSize      int // KV block size in tokens (default 16)
	KVBlocks       int // KV blocks; 0 = as many as KVBytes allows
	KVBytes        int64
	ContextLen     int // 0 = the model's own; a smaller value caps it
	// Sequences is how many sequences run at once when that is fewer than
	// MaxSeqs (speculation's draft rows are logit rows of the same
	// sequences); 0 = MaxSeqs. Per-sequence memory (Qwen3.5's recurrent
	// state slots) is sized by it, not by the rows.
	Sequences int
	// WindowKV keeps a sliding-window model's window layers in a KV store of
	// their own, of WindowKVBlocks blocks (0 = enough for Sequences sequences
	// at their windows and one batch), for kvcache's window group: the
	// engine must be given Window and WindowBlocks to match. Off: every
	// layer keeps every position (gemma3_window.go).
	WindowKV       bool
	WindowKVBlocks int
}

const defaultKVBytes = 1 << 30

// sequences is the most sequences one step carries (Options.Sequences).
func (o Options) sequences() int {
	if o.Sequences > 0 {
		return min(o.MaxSeqs, o.Sequences)
	}
	return o.MaxSeqs
}

func (o Options) withDefaults(c Config) Options {
	if o.MaxBatchTokens <= 0 {
		o.MaxBatchTokens = 512
	}
	if o.MaxSeqs <= 0 {
		o.MaxSeqs = 64
	}
	o.MaxSeqs = min(o.MaxSeqs, o.MaxBatchTokens)
	if o.BlockSize <= 0 {
		o.BlockSize = 16
	}
	if o.ContextLen <= 0 || o.ContextLen > c.ContextLen {
		o.ContextLen = c.ContextLen
	}
	o = o.windowDefaults(c)
	if o.KVBlocks <= 0 {
		if o.KVBytes <= 0 {
			o.KVBytes = defaultKVBytes
		}
		if perBlock := o.kvBlockBytes(c); perBlock > 0 { // K and V, F16, of the layers in the global store
			o.KVBlocks = int(max(o.KVBytes-o.windowStoreBytes(c), 0) / perBlock)
			// At least one full-context sequence must fit, or long prompts could never run.
			o.KVBlocks = max(o.KVBlocks, (o.ContextLen+o.BlockSize-1)/o.BlockSize+1)
		} else {
			o.KVBlocks = o.noGlobalBlocks()
		}
	}
	return o
}

// Load builds a Llama-family model from src on be: weights are uploaded as they
// are stored, scratch and the KV pool are allocated once.
func Load(src WeightSource, be kernels.Backend, opts Options) (*Llama, error) {
	cfg, err := src.Config()
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", src.Path(), err)
	}
	opts = opts.withDefaults(cfg)
	cfg.ContextLen = opts.ContextLen
	m := &Llama{cfg: cfg, be: be, opts: opts}
	w := weightLoader{src: src, be: be}
	if _, hf := src.(*HFDir); hf && isGemma(cfg.Arch) {
		w.normShift = 1 // Gemma's (1 + w) norms; GGUF files store 1 + w already
	}
	qDim, kvDim := cfg.Heads*cfg.HeadDim, cfg.KVHeads*cfg.HeadDim
	m.tokEmbd = w.load("token_embd.weight", cfg.Vocab, cfg.Hidden)
	m.outNorm = w.loadF32("output_norm.weight", cfg.Hidden)
	if cfg.TiedEmbeddings {
		m.output = m.tokEmbd
	} else {
		m.output = w.load("output.weight", cfg.Vocab, cfg.Hidden)
	}
	m.layers = make([]llamaLayer, cfg.Layers)
	var oss []gptossLayer // gpt-oss's layer extras
	for i := range m.layers {
		l, p := &m.layers[i], fmt.Sprintf("blk.%d.", i)
		if cfg.Arch == "phi3" {
			w.phi3Layer(l, p, cfg)
			continue
		}
		if cfg.Arch == "gemma4" {
			w.gemma4Layer(l, p, cfg, i)
			continue
		}
		l.attnNorm = w.loadF32(p+"attn_norm.weight", cfg.Hidden)
		l.wq = w.load(p+"attn_q.weight", qDim, cfg.Hidden)
		l.wk = w.load(p+"attn_k.weight", kvDim, cfg.Hidden)
		l.wv = w.load(p+"attn_v.weight", kvDim, cfg.Hidden)
		l.wo = w.load(p+"attn_output.weight", cfg.Hidden, qDim)
		if cfg.QKVBias {
			l.bq = w.loadF32(p+"attn_q.bias", qDim)
			l.bk = w.loadF32(p+"attn_k.bias", kvDim)
			l.bv = w.loadF32(p+"attn_v.bias", kvDim)
		}
		if cfg.Arch == "gpt-oss" {
			oss = append(oss, w.gptossLayer(l, p, cfg))
		} else {
			l.ffnNorm = w.loadF32(p+"ffn_norm.weight", cfg.Hidden)
		}
		if cfg.Experts > 0 {
			e, f := cfg.Experts, cfg.ExpertFFN
			l.wRouter = w.load(p+"ffn_gate_inp.weight", e, cfg.Hidden)
			l.wGate = w.load(p+"ffn_gate_exps.weight", e, f, cfg.Hidden)
			l.wUp = w.load(p+"ffn_up_exps.weight", e, f, cfg.Hidden)
			l.wDown = w.load(p+"ffn_down_exps.weight", e, cfg.Hidden, f)
			if cfg.SharedExpertFFN > 0 {
				w.sharedExpert(l, p, cfg)
			}
			continue
		}
		l.wGate = w.load(p+"ffn_gate.weight", cfg.FFN, cfg.Hidden)
		l.wUp = w.load(p+"ffn_up.weight", cfg.FFN, cfg.Hidden)
		l.wDown = w.load(p+"ffn_down.weight", cfg.Hidden, cfg.FFN)
	}
	var freqs []float32
	if src.Has("rope_freqs.weight") {
		// Llama 3 GGUF files carry the scaling as per-pair divisors instead of
		// metadata; applying both would scale twice.
		unscaled := cfg
		unscaled.RopeScaling = nil
		freqs = ropeFrequencies(unscaled)
		w.loadF32("rope_freqs.weight", cfg.HeadDim/2)
		for i, div := range w.host["rope_freqs.weight"] {
			freqs[i] /= div
		}
	} else if cfg.Arch == "phi3" {
		freqs = w.phi3Frequencies(cfg)
	} else {
		freqs = ropeFrequencies(cfg)
	}
	if w.err != nil {
		return nil, w.err
	}
	if cfg.Arch == "gpt-oss" {
		if err := m.loadGPTOSS(oss); err != nil {
			return nil, err
		}
	}
	if cfg.Arch == "gemma4" {
		if err := m.loadGemma4(&w); err != nil {
			return nil, err
		}
	} else if isGemma(cfg.Arch) {
		if err := m.loadGemma3(&w); err != nil {
			return nil, err
		}
	} else if cfg.QKNormWhole {
		if err := m.loadWholeQKNorm(&w); err != nil {
			return nil, err
		}
	} else if cfg.QKNorm {
		if err := m.loadQKNorm(&w); err != nil {
			return nil, err
		}
	}
	if !isGemma(cfg.Arch) && cfg.Arch != "gemma4" && cfg.Window > 0 {
		if err := m.loadWindow(); err != nil {
			return nil, err
		}
	}
	if cfg.Experts > 0 {
		ops, ok := be.(kernels.MoEOps)
		if !ok {
			return nil, fmt.Errorf("%s: the %s backend lacks MoEFFN (mixture of experts): %w", cfg.Arch, be.Name(), ErrUnsupported)
		}
		m.moe = ops
	}
	if cfg.SharedExpertFFN > 0 {
		ops, ok := be.(kernels.SharedExpertOps)
		if !ok {
			return nil, fmt.Errorf("%s: the %s backend lacks GatedAdd (shared expert): %w", cfg.Arch, be.Name(), ErrUnsupported)
		}
		m.shared = ops
	}
	if m.invFreq, err = be.Upload(f32Host("rope.inv_freq", freqs)); err != nil {
		return nil, err
	}
	if err := m.allocate(); err != nil {
		return nil, fmt.Errorf("%s: %w", src.Path(), err)
	}
	return m, nil
}

func (m *Llama) allocate() error {
	c, o, be := m.cfg, m.opts, m.be
	rows := o.MaxBatchTokens
	var err error
	alloc := func(shape ...int) kernels.Tensor {
		if err != nil {
			return nil
		}
		var t kernels.Tensor
		t, err = be.Alloc(shape...)
		return t
	}
	m.x, m.h, m.o = alloc(rows, c.Hidden), alloc(rows, c.Hidden), alloc(rows, c.Hidden)
	m.q, m.att = alloc(rows, c.Heads*c.HeadDim), alloc(rows, c.Heads*c.HeadDim)
	m.k, m.v = alloc(rows, c.KVHeads*c.HeadDim), alloc(rows, c.KVHeads*c.HeadDim)
	ffn := c.FFN
	if c.SharedExpertFFN > 0 {
		ffn = c.SharedExpertFFN // a mixture never runs the dense FFN: these hold the shared expert's
	}
	m.gate, m.up = alloc(rows, ffn), alloc(rows, ffn)
	if c.Experts > 0 {
		m.router = alloc(rows, c.Experts)
	}
	if c.SharedExpertFFN > 0 {
		m.shGate = alloc(rows, 1)
	}
	m.sel, m.logits = alloc(o.MaxSeqs, c.Hidden), alloc(o.MaxSeqs, c.Vocab)
	if err != nil {
		return err
	}
	m.qkvOut, m.gateUpOut = []kernels.Tensor{m.q, m.k, m.v}, []kernels.Tensor{m.gate, m.up}
	for i := range m.layers {
		l := &m.layers[i]
		l.qkv, l.gateUp = []kernels.Tensor{l.wq, l.wk, l.wv}, []kernels.Tensor{l.wGate, l.wUp}
		if l.bq != nil || l.bk != nil || l.bv != nil {
			l.qkvBias = []kernels.Tensor{l.bq, l.bk, l.bv}
		}
	}
	m.host = make([]float32, o.MaxSeqs*c.Vocab)
	return m.allocKV()
}

func (c Config) validate() error {
	switch {
	case !slices.Contains([]string{"llama", "qwen2", "qwen3", "qwen3moe", "qwen2moe", "olmoe", "gemma2", "gemma3", "gemma4", "phi3", "smollm3", "gpt-oss"}, c.Arch):
		return fmt.Errorf("unsupported architecture %q (supported: llama, qwen2, qwen3, qwen3moe, qwen2moe, olmoe, gemma2, gemma3, gemma4, phi3, smollm3, gpt-oss)", c.Arch)
	case c.Layers <= 0 || c.Hidden <= 0 || c.FFN <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Vocab <= 0:
		return fmt.Errorf("incomplete model shape %+v", c)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("%d attention heads do not divide into %d KV heads", c.Heads, c.KVHeads)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("head size %d is odd; RoPE rotates pairs", c.HeadDim)
	case c.ContextLen <= 0:
		return fmt.Errorf("context length %d", c.ContextLen)
	}
	return nil
}

// weightLoader checks each tensor's shape and uploads it, keeping the first error
// so Load reads as a list of the tensors a model needs.
type weightLoader struct {
	src  WeightSource
	be   kernels.Backend
	err  error
	host map[string][]float32 // F32 copies made for norms and biases, by name
	// normShift is added to every *norm.weight loaded (Gemma's (1 + w) in a
	// Hugging Face checkpoint).
	normShift float32
}

func (w *weightLoader) get(name string, shape ...int) (kernels.HostTensor, bool) {
	if w.err != nil {
		return kernels.HostTensor{}, false
	}
	t, err := w.src.Tensor(name)
	if err != nil {
		w.err = fmt.Errorf("%s: %w", w.src.Path(), err)
		return t, false
	}
	if !slices.Equal(t.Shape, shape) {
		w.err = fmt.Errorf("%s: tensor %s has shape %v, want %v", w.src.Path(), name, t.Shape, shape)
		return t, false
	}
	return t, true
}

func (w *weightLoader) load(name string, shape ...int) kernels.Tensor {
	t, ok := w.get(name, shape...)
	if !ok {
		return nil
	}
	up, err := w.be.Upload(t)
	if err != nil {
		w.err = fmt.Errorf("%s: %w", w.src.Path(), err)
	}
	return up
}

// loadF32 is for small vectors (norms, biases) that kernels take as F32 whatever
// the file stores them in.
func (w *weightLoader) loadF32(name string, n int) kernels.Tensor {
	t, ok := w.get(name, n)
	if !ok {
		return nil
	}
	vals := make([]float32, n)
	if err := quant.Dequantize(t.DType, t.Data, vals); err != nil {
		w.err = fmt.Errorf("%s: tensor %s: %w", w.src.Path(), name, err)
		return nil
	}
	if w.normShift != 0 && strings.HasSuffix(name, "norm.weight") {
		for i := range vals {
			vals[i] += w.normShift
		}
	}
	if w.host == nil {
		w.host = map[string][]float32{}
	}
	w.host[name] = vals
	up, err := w.be.Upload(f32Host(name, vals))
	if err != nil {
		w.err = fmt.Errorf("%s: %w", w.src.Path(), err)
	}
	return up
}

func f32Host(name string, v []float32) kernels.HostTensor {
	return kernels.HostTensor{Name: name, DType: kernels.F32, Shape: []int{len(v)},
		Data: unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))}
}

// loadQKNorm loads Qwen3's per-head Q and K norms, which run on the
// backend's optional HeadNormOps.
func (m *Llama) loadQKNorm(w *weightLoader) error {
	ops, ok := m.be.(kernels.HeadNormOps)
	if !ok {
		return fmt.Errorf("%s: the %s backend lacks HeadRMSNorm (QK-norm): %w", m.cfg.Arch, m.be.Name(), ErrUnsupported)
	}
	for i := range m.layers {
		l, p := &m.layers[i], fmt.Sprintf("blk.%d.", i)
		l.qNorm = w.loadF32(p+"attn_q_norm.weight", m.cfg.HeadDim)
		l.kNorm = w.loadF32(p+"attn_k_norm.weight", m.cfg.HeadDim)
	}
	m.headNorm = ops
	return w.err
}
