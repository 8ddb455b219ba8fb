package models

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Qwen35Config reads a qwen35 GGUF's shape. The DeltaNet keys are llama.cpp's:
//
//	ssm.conv_kernel       the convolution's width
//	ssm.state_size        head size S of keys and values
//	ssm.group_count       key heads Hk
//	ssm.time_step_rank    value heads Hv (a multiple of Hk)
//	ssm.inner_size        Hv·S
//	full_attention_interval  layer i is full attention when (i+1) % it == 0 (default 4);
//	                      attention.recurrent_layers, when present, says it per layer
//	nextn_predict_layers  the last this many of block_count are MTP blocks (default 0)
func (g *GGUFFile) Qwen35Config() (Qwen35Config, error) {
	arch, _ := g.String("general.architecture")
	if arch != "qwen35" && arch != "qwen35moe" {
		return Qwen35Config{}, fmt.Errorf("gguf %s: architecture %q, not qwen35 or qwen35moe: %w", g.path, arch, ErrUnsupported)
	}
	m := metaReader{g: g, prefix: arch + "."}
	c := Qwen35Config{Arch: arch}
	c.Layers = m.int("block_count")
	c.Hidden = m.int("embedding_length")
	c.FFN = m.int("feed_forward_length")
	c.Heads = m.int("attention.head_count")
	c.KVHeads = m.intOr("attention.head_count_kv", c.Heads)
	c.ContextLen = m.int("context_length")
	c.RMSEps = m.float("attention.layer_norm_rms_epsilon")
	c.RopeTheta = m.floatOr("rope.freq_base", 10000)
	if c.Heads > 0 {
		c.HeadDim = m.intOr("attention.key_length", c.Hidden/c.Heads)
	}
	c.RopeDims = m.intOr("rope.dimension_count", c.HeadDim)
	dn := &c.DeltaNet
	dn.Kernel = m.int("ssm.conv_kernel")
	dn.HeadDim = m.int("ssm.state_size")
	dn.KHeads = m.int("ssm.group_count")
	dn.VHeads = m.int("ssm.time_step_rank")
	inner := m.int("ssm.inner_size")
	c.fullAttentionInterval = m.intOr("full_attention_interval", 4)
	if arch == "qwen35moe" {
		c.Experts = m.int("expert_count")
		c.ExpertsUsed = m.int("expert_used_count")
		c.ExpertFFN = m.intOr("expert_feed_forward_length", 0)
		c.SharedFFN = m.intOr("expert_shared_feed_forward_length", c.FFN)
	}
	c.Vocab = m.intOr("vocab_size", 0)
	c.MTPLayers = m.intOr("nextn_predict_layers", 0)
	if m.err != nil {
		return Qwen35Config{}, m.err
	}
	if c.MTPLayers < 0 || c.MTPLayers >= c.Layers {
		return Qwen35Config{}, fmt.Errorf("gguf %s: %d nextn layers of a block count of %d: %w", g.path, c.MTPLayers, c.Layers, ErrMalformed)
	}
	c.Layers -= c.MTPLayers
	if c.Vocab == 0 {
		c.Vocab = g.vocabFallback()
	}
	dn.Eps = c.RMSEps
	c.TiedEmbeddings = !g.Has("output.weight")
	c.Recurrent = make([]bool, max(c.Layers, 0))
	if v, ok := g.meta[arch+".attention.recurrent_layers"]; ok {
		flags, ok := v.([]bool)
		if !ok || len(flags) < c.Layers {
			return Qwen35Config{}, fmt.Errorf("gguf %s: %s.attention.recurrent_layers = %v: %w", g.path, arch, v, ErrMalformed)
		}
		copy(c.Recurrent, flags)
	} else if c.fullAttentionInterval > 0 {
		for i := range c.Recurrent {
			c.Recurrent[i] = (i+1)%c.fullAttentionInterval != 0
		}
	}
	if c.fullAttentionInterval <= 0 {
		return Qwen35Config{}, fmt.Errorf("gguf %s: full_attention_interval %d: %w", g.path, c.fullAttentionInterval, ErrMalformed)
	}
	if inner != dn.VHeads*dn.HeadDim {
		return Qwen35Config{}, fmt.Errorf("gguf %s: DeltaNet of %d value heads of %d, inner size %d: %w", g.path, dn.VHeads, dn.HeadDim, inner, ErrMalformed)
	}
	if err := c.finish(); err != nil {
		return Qwen35Config{}, fmt.Errorf("gguf %s: %w", g.path, err)
	}
	if c.Experts > 0 && c.ExpertFFN == 0 {
		c.ExpertFFN = c.FFN / c.ExpertsUsed // llama.cpp's default for a file without the key
	}
	return c, nil
}

// finish counts the layers of each kind and checks the shape, whichever
// format it was read from.
func (c *Qwen35Config) finish() error {
	c.attnLayers, c.recurrentLayers = 0, 0
	for _, r := range c.Recurrent {
		if r {
			c.recurrentLayers++
		} else {
			c.attnLayers++
		}
	}
	dn := c.DeltaNet
	switch {
	case c.Layers <= 0 || c.Hidden <= 0 || c.FFN <= 0 || c.Heads <= 0 || c.KVHeads <= 0 || c.HeadDim <= 0 || c.Vocab <= 0 || c.ContextLen <= 1 || len(c.Recurrent) != c.Layers:
		return fmt.Errorf("incomplete qwen35 shape %+v: %w", *c, ErrMalformed)
	case c.Heads%c.KVHeads != 0 || c.RopeDims <= 0 || c.RopeDims%2 != 0 || c.RopeDims > c.HeadDim:
		return fmt.Errorf("%d heads over %d KV heads, %d of %d head elements rotating: %w",
			c.Heads, c.KVHeads, c.RopeDims, c.HeadDim, ErrMalformed)
	case dn.KHeads <= 0 || dn.VHeads%dn.KHeads != 0 || dn.HeadDim <= 0:
		return fmt.Errorf("DeltaNet of %d key heads, %d value heads of %d: %w", dn.KHeads, dn.VHeads, dn.HeadDim, ErrMalformed)
	case c.Arch == "qwen35moe" && (c.Experts <= 0 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts || c.SharedFFN <= 0):
		return fmt.Errorf("%d experts, %d used, shared expert of %d: %w", c.Experts, c.ExpertsUsed, c.SharedFFN, ErrMalformed)
	case dn.Kernel < 1 || dn.Kernel > 17:
		return fmt.Errorf("convolution width %d (1 to 17): %w", dn.Kernel, ErrUnsupported)
	}
	return nil
}

// IsQwen35 says whether src is a Qwen3.5/3.6 model (GGUF qwen35 or
// qwen35moe, or a Hugging Face Qwen3.5 checkpoint), which LoadQwen35Source
// builds and Load refuses.
func IsQwen35(src WeightSource) bool {
	switch s := src.(type) {
	case *GGUFFile:
		arch, _ := s.String("general.architecture")
		return arch == "qwen35" || arch == "qwen35moe"
	case *HFDir:
		return isHFQwen35(hfArchitecture(s.dir))
	}
	return false
}

// Qwen35ConfigOf reads a Qwen3.5 model's shape from either format.
func Qwen35ConfigOf(src WeightSource) (Qwen35Config, error) {
	switch s := src.(type) {
	case *GGUFFile:
		return s.Qwen35Config()
	case *HFDir:
		return s.Qwen35Config()
	}
	return Qwen35Config{}, fmt.Errorf("%s: a Qwen3.5 model from a %T: %w", src.Path(), src, ErrUnsupported)
}

// LoadQwen35Source is LoadQwen35 for a GGUF file or a Hugging Face directory.
func LoadQwen35Source(src WeightSource, be kernels.Backend, opts Options) (*Qwen35, error) {
	switch s := src.(type) {
	case *GGUFFile:
		return LoadQwen35(s, be, opts)
	case *HFDir:
		c, err := s.Qwen35Config()
		if err != nil {
			return nil, err
		}
		return buildQwen35(s, c, be, opts)
	}
	return nil, fmt.Errorf("%s: a Qwen3.5 model from a %T: %w", src.Path(), src, ErrUnsupported)
}

// LoadQwen35 builds a Qwen3.5/3.6 model from a qwen35 or qwen35moe GGUF on
// be, which must implement kernels.DeltaNetOps and kernels.HeadNormOps (and
// the MoE ops for qwen35moe). Options are Load's, the KV budget counting the
// full-attention layers only; the recurrent-state store is sized by
// stateSlots.
func LoadQwen35(g *GGUFFile, be kernels.Backend, opts Options) (*Qwen35, error) {
	c, err := g.Qwen35Config()
	if err != nil {
		return nil, err
	}
	return buildQwen35(g, c, be, opts)
}

func buildQwen35(g WeightSource, c Qwen35Config, be kernels.Backend, opts Options) (*Qwen35, error) {
	var err error
	dn, ok := be.(kernels.DeltaNetOps)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend lacks DeltaNet (hybrid linear attention): %w", c.Arch, be.Name(), ErrUnsupported)
	}
	hn, ok := be.(kernels.HeadNormOps)
	if !ok {
		return nil, fmt.Errorf("%s: the %s backend lacks HeadRMSNorm (QK-norm): %w", c.Arch, be.Name(), ErrUnsupported)
	}
	// Options' KV sizing counts the attention layers only: the others keep no KV.
	kvShape := Config{Arch: c.Arch, Layers: max(c.attnLayers, 1), KVHeads: c.KVHeads, HeadDim: c.HeadDim, ContextLen: c.ContextLen}
	opts = opts.withDefaults(kvShape)
	c.ContextLen = opts.ContextLen
	m := &Qwen35{cfg: c, be: be, dn: dn, hn: hn, opts: opts}
	w := weightLoader{src: g, be: be}
	m.tokEmbd = w.load("token_embd.weight", c.Vocab, c.Hidden)
	m.outNorm = w.loadF32("output_norm.weight", c.Hidden)
	if c.TiedEmbeddings {
		m.output = m.tokEmbd
	} else {
		m.output = w.load("output.weight", c.Vocab, c.Hidden)
	}
	m.layers = make([]qwen35Layer, c.Layers)
	attn, rec := 0, 0
	for i := range m.layers {
		l, p := &m.layers[i], fmt.Sprintf("blk.%d.", i)
		l.recurrent = c.Recurrent[i]
		l.attnNorm = w.loadF32(p+"attn_norm.weight", c.Hidden)
		l.post = w.loadF32(p+"post_attention_norm.weight", c.Hidden)
		if l.recurrent {
			l.ord, rec = rec, rec+1
			w.qwen35DeltaNet(l, p, c)
		} else {
			l.ord, attn = attn, attn+1
			w.qwen35Attention(l, p, c)
		}
		if c.Experts > 0 {
			w.qwen35MoE(l, p, c)
			continue
		}
		l.wGate = w.load(p+"ffn_gate.weight", c.FFN, c.Hidden)
		l.wUp = w.load(p+"ffn_up.weight", c.FFN, c.Hidden)
		l.wDown = w.load(p+"ffn_down.weight", c.Hidden, c.FFN)
	}
	if w.err != nil {
		return nil, w.err
	}
	if c.Experts > 0 {
		moe, ok := be.(kernels.MoEOps)
		sh, ok2 := be.(kernels.SharedExpertOps)
		if !ok || !ok2 {
			return nil, fmt.Errorf("%s: the %s backend lacks MoEFFN or GatedAdd (mixture of experts): %w", c.Arch, be.Name(), ErrUnsupported)
		}
		m.moe, m.shared = moe, sh
	}
	freqs := make([]float32, c.RopeDims/2)
	for i := range freqs {
		freqs[i] = float32(math.Pow(float64(c.RopeTheta), -2*float64(i)/float64(c.RopeDims)))
	}
	if m.invFreq, err = be.Upload(f32Host("rope.inv_freq", freqs)); err != nil {
		return nil, err
	}
	if err := m.allocate(); err != nil {
		return nil, fmt.Errorf("%s: %w", g.Path(), err)
	}
	return m, nil
}

// qwen35Attention loads a full-attention layer. attn_q holds, per head, the
// head's query rows then its gate rows; they are split, and the rotating
// part of Q and K (with their norms) permuted from NeoX pairs (j, j+r/2) to
// interleaved ones (2j, 2j+1), so the interleaved kernel with r/2
// frequencies rotates what llama.cpp rotates. Permuting q and k alike
// leaves every q·k, and the per-head norms, unchanged.
func (w *weightLoader) qwen35Attention(l *qwen35Layer, p string, c Qwen35Config) {
	hd := c.HeadDim
	if qg, ok := w.get(p+"attn_q.weight", 2*c.Heads*hd, c.Hidden); ok {
		q, gate := w.deinterleave(qg, c.Heads, hd)
		l.wq, l.wqGate = w.upload(w.ropePermute(q, c.Heads, hd, c.RopeDims)), w.upload(gate)
	}
	if k, ok := w.get(p+"attn_k.weight", c.KVHeads*hd, c.Hidden); ok {
		l.wk = w.upload(w.ropePermute(k, c.KVHeads, hd, c.RopeDims))
	}
	l.wv = w.load(p+"attn_v.weight", c.KVHeads*hd, c.Hidden)
	l.wo = w.load(p+"attn_output.weight", c.Hidden, c.Heads*hd)
	l.qNorm = w.permutedNorm(p+"attn_q_norm.weight", hd, c.RopeDims)
	l.kNorm = w.permutedNorm(p+"attn_k_norm.weight", hd, c.RopeDims)
}

// qwen35DeltaNet loads a Gated DeltaNet layer.
func (w *weightLoader) qwen35DeltaNet(l *qwen35Layer, p string, c Qwen35Config) {
	sh := c.DeltaNet
	vDim := sh.VHeads * sh.HeadDim
	l.wqkv = w.load(p+"attn_qkv.weight", sh.Channels(), c.Hidden)
	l.wz = w.load(p+"attn_gate.weight", vDim, c.Hidden)
	l.wBeta = w.load(p+"ssm_beta.weight", sh.VHeads, c.Hidden)
	l.wAlpha = w.load(p+"ssm_alpha.weight", sh.VHeads, c.Hidden)
	l.wOut = w.load(p+"ssm_out.weight", c.Hidden, vDim)
	l.dn = kernels.DeltaNetWeights{
		DtBias: w.loadF32(p+"ssm_dt.bias", sh.VHeads),
		A:      w.loadF32(p+"ssm_a", sh.VHeads),
		Norm:   w.loadF32(p+"ssm_norm.weight", sh.HeadDim),
	}
	if t, ok := w.get(p+"ssm_conv1d.weight", sh.Channels(), sh.Kernel); ok {
		if t.DType != kernels.F32 {
			w.err = fmt.Errorf("%s: %s is %v; the convolution reads F32: %w", w.src.Path(), t.Name, t.DType, ErrUnsupported)
			return
		}
		l.dn.Conv = w.upload(t)
	}
}

// deinterleave splits t, heads of [2·hd] rows (hd of one kind, then hd of
// the other), into the two kinds' [heads·hd] row tensors (copies).
func (w *weightLoader) deinterleave(t kernels.HostTensor, heads, hd int) (a, b kernels.HostTensor) {
	rb := t.DType.RowBytes(t.Shape[1])
	da, db := make([]byte, heads*hd*rb), make([]byte, heads*hd*rb)
	for h := range heads {
		copy(da[h*hd*rb:(h+1)*hd*rb], t.Data[(2*h)*hd*rb:(2*h+1)*hd*rb])
		copy(db[h*hd*rb:(h+1)*hd*rb], t.Data[(2*h+1)*hd*rb:(2*h+2)*hd*rb])
	}
	shape := []int{heads * hd, t.Shape[1]}
	return kernels.HostTensor{Name: t.Name + "[q]", DType: t.DType, Shape: shape, Data: da},
		kernels.HostTensor{Name: t.Name + "[gate]", DType: t.DType, Shape: shape, Data: db}
}

// ropePermute reorders, in each head of hd rows, the first r rows from NeoX
// pairs (j, j+r/2) to interleaved pairs (2j, 2j+1); a copy.
func (w *weightLoader) ropePermute(t kernels.HostTensor, heads, hd, r int) kernels.HostTensor {
	rb := t.DType.RowBytes(t.Shape[1])
	data := make([]byte, len(t.Data))
	copy(data, t.Data)
	for h := range heads {
		for j := range r / 2 {
			for half := range 2 {
				src := (h*hd + half*r/2 + j) * rb
				dst := (h*hd + 2*j + half) * rb
				copy(data[dst:dst+rb], t.Data[src:src+rb])
			}
		}
	}
	t.Data = data
	return t
}

// permutedNorm loads a per-head norm gain with ropePermute's order.
func (w *weightLoader) permutedNorm(name string, hd, r int) kernels.Tensor {
	t, ok := w.get(name, hd)
	if !ok {
		return nil
	}
	t = w.ropePermute(kernels.HostTensor{Name: t.Name, DType: t.DType, Shape: []int{hd, 1}, Data: t.Data}, 1, hd, r)
	t.Shape = []int{hd}
	return w.loadHostF32(t)
}

func (m *Qwen35) allocate() error {
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
	sh := c.DeltaNet
	m.x, m.h, m.o = alloc(rows, c.Hidden), alloc(rows, c.Hidden), alloc(rows, c.Hidden)
	m.q, m.qGate, m.att = alloc(rows, c.Heads*c.HeadDim), alloc(rows, c.Heads*c.HeadDim), alloc(rows, c.Heads*c.HeadDim)
	m.k, m.v = alloc(rows, c.KVHeads*c.HeadDim), alloc(rows, c.KVHeads*c.HeadDim)
	m.qkv = alloc(rows, sh.Channels())
	m.z, m.dnOut = alloc(rows, sh.VHeads*sh.HeadDim), alloc(rows, sh.VHeads*sh.HeadDim)
	m.beta, m.alpha = alloc(rows, sh.VHeads), alloc(rows, sh.VHeads)
	ffn := c.FFN
	if c.Experts > 0 {
		ffn = c.SharedFFN // a mixture never runs the dense FFN: these hold the shared expert's
		m.router, m.shGate = alloc(rows, c.Experts), alloc(rows, 1)
	}
	m.gate, m.up = alloc(rows, ffn), alloc(rows, ffn)
	m.sel, m.logits = alloc(o.MaxSeqs, c.Hidden), alloc(o.MaxSeqs, c.Vocab)
	if err != nil {
		return err
	}
	m.host = make([]float32, o.MaxSeqs*c.Vocab)
	if m.kv, err = be.NewKVStore(kernels.KVConfig{Layers: max(c.attnLayers, 1), Blocks: o.KVBlocks, BlockSize: o.BlockSize,
		KVHeads: c.KVHeads, HeadDim: c.HeadDim}); err != nil {
		return err
	}
	sc := kernels.StateConfig{Layers: max(c.recurrentLayers, 1), Conv: (sh.Kernel - 1) * sh.Channels(), SSM: sh.VHeads * sh.HeadDim * sh.HeadDim}
	sc.Slots = stateSlots(o, sc.SlotBytes())
	m.states, err = m.dn.NewStateStore(sc)
	return err
}

// stateSlots sizes the recurrent-state store: a slot for each sequence a
// step may carry (Options.Sequences: a speculating engine's extra logit
// rows are drafts of those sequences, which need no slot) and half as many again for checkpoints (forks) and cached
// prefix states, within a quarter of the KV byte budget when there is one
// (a slot of Qwen3.5-0.8B is 20 MiB: 18 layers of 16 heads' 128×128 state),
// and at least 2.
func stateSlots(o Options, slotBytes int64) int {
	seqs := o.sequences()
	n := seqs + (seqs+1)/2
	if o.KVBytes > 0 && slotBytes > 0 {
		n = min(n, int(o.KVBytes/4/slotBytes))
	}
	return max(n, 2)
}

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// loadHostF32 is loadF32 for a tensor already in hand (a permuted copy).
func (w *weightLoader) loadHostF32(t kernels.HostTensor) kernels.Tensor {
	if w.err != nil {
		return nil
	}
	vals := make([]float32, t.Shape[0])
	if err := quant.Dequantize(t.DType, t.Data, vals); err != nil {
		w.err = fmt.Errorf("%s: tensor %s: %w", w.src.Path(), t.Name, err)
		return nil
	}
	up, err := w.be.Upload(f32Host(t.Name, vals))
	if err != nil {
		w.err = fmt.Errorf("%s: %w", w.src.Path(), err)
	}
	return up
}

// qwen35MoE loads a qwen35moe layer's mixture: the router, the experts and
// the shared expert (whose gate is a vector in the file, a one-row matrix
// to MatMul).
func (w *weightLoader) qwen35MoE(l *qwen35Layer, p string, c Qwen35Config) {
	e, f, sf := c.Experts, c.ExpertFFN, c.SharedFFN
	l.wRouter = w.load(p+"ffn_gate_inp.weight", e, c.Hidden)
	l.wGate = w.load(p+"ffn_gate_exps.weight", e, f, c.Hidden)
	l.wUp = w.load(p+"ffn_up_exps.weight", e, f, c.Hidden)
	l.wDown = w.load(p+"ffn_down_exps.weight", e, c.Hidden, f)
	l.shGate = w.load(p+"ffn_gate_shexp.weight", sf, c.Hidden)
	l.shUp = w.load(p+"ffn_up_shexp.weight", sf, c.Hidden)
	l.shDown = w.load(p+"ffn_down_shexp.weight", c.Hidden, sf)
	if t, ok := w.get(p+"ffn_gate_inp_shexp.weight", c.Hidden); ok {
		t.Shape = []int{1, c.Hidden}
		l.shInp = w.upload(t)
	}
}
