package modeltest

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Qwen35Spec is a tiny random-weight Qwen3.5 (GGUF arch qwen35): Gated
// DeltaNet layers with a full-attention layer every Interval-th, laid out
// as llama.cpp v0.5.0's convert_hf_to_gguf writes them.
type Qwen35Spec struct {
	Layers, Hidden, FFN, Vocab int
	Heads, KVHeads, HeadDim    int // the full-attention layers
	RopeDims                   int // 0: HeadDim/4 (Qwen3.5's partial_rotary_factor 0.25)
	Interval                   int // full_attention_interval (0: 4)
	KHeads, VHeads, StateSize  int // DeltaNet: key heads, value heads, head size
	ConvKernel                 int // 0: 4
	ContextLen                 int // 0: 256
	RopeTheta                  float32
	RMSEps                     float32
	Tied                       bool
	Seed                       uint64
	// Qwen3.5/3.6 MoE (arch qwen35moe) when Experts > 0: every layer's
	// feed-forward is the top-ExpertsUsed mixture of Experts SwiGLU experts
	// of ExpertFFN plus a shared expert of SharedFFN behind a sigmoid gate.
	Experts, ExpertsUsed, ExpertFFN, SharedFFN int
	// MTP adds a multi-token-prediction block (nextn_predict_layers 1) as
	// blk.<Layers>: a full-attention layer with its feed-forward, and
	// nextn.eh_proj, enorm, hnorm and shared_head_norm.
	MTP bool
	// MTPEcho makes that block pass the trunk's state through beside its
	// attention (eh_proj's hidden half the identity, its embedding half and
	// the feed-forward's down projections zero), so that the head often
	// guesses what the trunk guessed a position before: right where the
	// output repeats a token, as random models' greedy output may.
	MTPEcho bool
}

// Arch is the GGUF architecture the spec writes.
func (s Qwen35Spec) Arch() string {
	if s.Experts > 0 {
		return "qwen35moe"
	}
	return "qwen35"
}

func (s Qwen35Spec) withDefaults() Qwen35Spec {
	if s.RopeDims == 0 {
		s.RopeDims = s.HeadDim / 4
	}
	if s.Interval == 0 {
		s.Interval = 4
	}
	if s.ConvKernel == 0 {
		s.ConvKernel = 4
	}
	if s.ContextLen == 0 {
		s.ContextLen = 256
	}
	if s.RopeTheta == 0 {
		s.RopeTheta = 10000000
	}
	if s.RMSEps == 0 {
		s.RMSEps = 1e-6
	}
	return s
}

func (s Qwen35Spec) mtpLayers() int {
	if s.MTP {
		return 1
	}
	return 0
}

// Recurrent says whether layer i is a DeltaNet layer.
func (s Qwen35Spec) Recurrent(i int) bool { return (i+1)%s.withDefaults().Interval != 0 }

// qwen35Tensors lists every tensor with its GGUF shape, [rows, cols].
func qwen35Tensors(s Qwen35Spec) []tensorShape {
	var out []tensorShape
	add := func(name string, shape ...int) { out = append(out, tensorShape{name, shape}) }
	add("token_embd.weight", s.Vocab, s.Hidden)
	add("output_norm.weight", s.Hidden)
	if !s.Tied {
		add("output.weight", s.Vocab, s.Hidden)
	}
	ch := (2*s.KHeads + s.VHeads) * s.StateSize
	vDim := s.VHeads * s.StateSize
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", s.Hidden)
		add(p+"post_attention_norm.weight", s.Hidden)
		if s.Recurrent(l) {
			add(p+"attn_qkv.weight", ch, s.Hidden)
			add(p+"attn_gate.weight", vDim, s.Hidden)
			add(p+"ssm_conv1d.weight", ch, s.ConvKernel)
			add(p+"ssm_dt.bias", s.VHeads)
			add(p+"ssm_a", s.VHeads)
			add(p+"ssm_beta.weight", s.VHeads, s.Hidden)
			add(p+"ssm_alpha.weight", s.VHeads, s.Hidden)
			add(p+"ssm_norm.weight", s.StateSize)
			add(p+"ssm_out.weight", s.Hidden, vDim)
		} else {
			add(p+"attn_q.weight", 2*s.Heads*s.HeadDim, s.Hidden)
			add(p+"attn_k.weight", s.KVHeads*s.HeadDim, s.Hidden)
			add(p+"attn_v.weight", s.KVHeads*s.HeadDim, s.Hidden)
			add(p+"attn_output.weight", s.Hidden, s.Heads*s.HeadDim)
			add(p+"attn_q_norm.weight", s.HeadDim)
			add(p+"attn_k_norm.weight", s.HeadDim)
		}
		if s.Experts > 0 {
			add(p+"ffn_gate_inp.weight", s.Experts, s.Hidden)
			add(p+"ffn_gate_exps.weight", s.Experts, s.ExpertFFN, s.Hidden)
			add(p+"ffn_up_exps.weight", s.Experts, s.ExpertFFN, s.Hidden)
			add(p+"ffn_down_exps.weight", s.Experts, s.Hidden, s.ExpertFFN)
			add(p+"ffn_gate_inp_shexp.weight", s.Hidden)
			add(p+"ffn_gate_shexp.weight", s.SharedFFN, s.Hidden)
			add(p+"ffn_up_shexp.weight", s.SharedFFN, s.Hidden)
			add(p+"ffn_down_shexp.weight", s.Hidden, s.SharedFFN)
			continue
		}
		add(p+"ffn_gate.weight", s.FFN, s.Hidden)
		add(p+"ffn_up.weight", s.FFN, s.Hidden)
		add(p+"ffn_down.weight", s.Hidden, s.FFN)
	}
	if s.MTP {
		out = append(out, qwen35MTPTensors(s)...)
	}
	return out
}

// qwen35MTPTensors is the MTP block's tensors, as convert_hf_to_gguf
// names Qwen3.5's mtp.* (the trunk layers' own, and nextn.*).
func qwen35MTPTensors(s Qwen35Spec) []tensorShape {
	t := s
	t.Layers, t.MTP, t.Interval, t.Tied = 1, false, 1, true // one full-attention layer, no output
	var out []tensorShape
	p := fmt.Sprintf("blk.%d.", s.Layers)
	for _, ts := range qwen35Tensors(t) {
		if after, ok := strings.CutPrefix(ts.name, "blk.0."); ok {
			out = append(out, tensorShape{p + after, ts.shape})
		}
	}
	return append(out,
		tensorShape{p + "nextn.eh_proj.weight", []int{s.Hidden, 2 * s.Hidden}},
		tensorShape{p + "nextn.enorm.weight", []int{s.Hidden}},
		tensorShape{p + "nextn.hnorm.weight", []int{s.Hidden}},
		tensorShape{p + "nextn.shared_head_norm.weight", []int{s.Hidden}})
}

// qwen35Weight draws one tensor from its own stream seeded by (Seed, name).
func qwen35Weight(s Qwen35Spec, ts tensorShape) []float32 {
	n := 1
	for _, d := range ts.shape {
		n *= d
	}
	if after, ok := strings.CutPrefix(ts.name, fmt.Sprintf("blk.%d.", s.Layers)); ok && s.MTP && s.MTPEcho {
		switch {
		case after == "nextn.eh_proj.weight":
			w := make([]float32, n)
			for r := range s.Hidden {
				w[r*2*s.Hidden+s.Hidden+r] = 1
			}
			return w
		case strings.HasPrefix(after, "ffn_down"):
			return make([]float32, n)
		}
	}
	h := fnv.New64a()
	h.Write([]byte(ts.name))
	rng := rand.New(rand.NewPCG(s.Seed, h.Sum64()))
	w := make([]float32, n)
	name := ts.name
	for i := range w {
		g := rng.NormFloat64()
		var v float64
		switch {
		case strings.HasSuffix(name, "ssm_a"):
			v = -math.Exp(0.5 * g) // −exp(A_log): decays of e^(−0.6…−1.6·softplus)
		case strings.HasSuffix(name, "ssm_dt.bias"):
			v = 0.5 * g
		case strings.HasSuffix(name, "ssm_conv1d.weight"):
			v = 0.5 * g
		case strings.HasSuffix(name, "norm.weight"):
			v = 1 + 0.1*g
		case name == "token_embd.weight":
			v = g
		default:
			v = g / math.Sqrt(float64(ts.shape[len(ts.shape)-1]))
		}
		w[i] = float32(v)
	}
	return w
}

// WriteQwen35GGUF writes spec as a qwen35 GGUF: matrices in dtype, vectors
// and the convolution F32, the tiny vocabulary.
func WriteQwen35GGUF(path string, spec Qwen35Spec, dtype kernels.DType) error {
	s := spec.withDefaults()
	if s.Layers <= 0 || s.Hidden <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.HeadDim <= 0 || s.KHeads <= 0 ||
		s.VHeads%max(s.KHeads, 1) != 0 || s.StateSize <= 0 || s.Vocab < MinVocab || s.RopeDims%2 != 0 {
		return fmt.Errorf("modeltest: invalid qwen35 spec %+v", s)
	}
	var tensors []Tensor
	for _, ts := range qwen35Tensors(s) {
		dt := dtype
		if len(ts.shape) == 1 || strings.HasSuffix(ts.name, "ssm_conv1d.weight") {
			dt = kernels.F32
		}
		if cols := ts.shape[len(ts.shape)-1]; cols%dt.BlockElems() != 0 {
			return fmt.Errorf("modeltest: %s: rows of %d are not a multiple of %v's block of %d", ts.name, cols, dt, dt.BlockElems())
		}
		data, err := quant.Quantize(dt, qwen35Weight(s, ts))
		if err != nil {
			return fmt.Errorf("modeltest: %s as %v: %w", ts.name, dt, err)
		}
		tensors = append(tensors, Tensor{Name: ts.name, DType: dt, Shape: ts.shape, Data: data})
	}
	r := s.RopeDims / 2
	sections := []int32{int32(r - 2*(r/3)), int32(r / 3), int32(r / 3), 0} // t, h, w, e: all one position for text
	a := s.Arch() + "."
	meta := []KV{
		{"general.architecture", s.Arch()},
		{"general.name", "modeltest"},
		{a + "block_count", uint32(s.Layers + s.mtpLayers())},
		{a + "context_length", uint32(s.ContextLen)},
		{a + "embedding_length", uint32(s.Hidden)},
		{a + "feed_forward_length", uint32(s.FFN)},
		{a + "attention.head_count", uint32(s.Heads)},
		{a + "attention.head_count_kv", uint32(s.KVHeads)},
		{a + "attention.key_length", uint32(s.HeadDim)},
		{a + "attention.value_length", uint32(s.HeadDim)},
		{a + "attention.layer_norm_rms_epsilon", s.RMSEps},
		{a + "rope.freq_base", s.RopeTheta},
		{a + "rope.dimension_count", uint32(s.RopeDims)},
		{a + "rope.dimension_sections", sections},
		{a + "ssm.conv_kernel", uint32(s.ConvKernel)},
		{a + "ssm.state_size", uint32(s.StateSize)},
		{a + "ssm.group_count", uint32(s.KHeads)},
		{a + "ssm.time_step_rank", uint32(s.VHeads)},
		{a + "ssm.inner_size", uint32(s.VHeads * s.StateSize)},
		{a + "full_attention_interval", uint32(s.Interval)},
		{a + "vocab_size", uint32(s.Vocab)},
	}
	if s.Experts > 0 {
		meta = append(meta, KV{a + "expert_count", uint32(s.Experts)}, KV{a + "expert_used_count", uint32(s.ExpertsUsed)},
			KV{a + "expert_feed_forward_length", uint32(s.ExpertFFN)}, KV{a + "expert_shared_feed_forward_length", uint32(s.SharedFFN)})
	}
	if s.MTP {
		meta = append(meta, KV{a + "nextn_predict_layers", uint32(1)})
	}
	meta = append(meta, ggufVocab(s.Vocab)...)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("modeltest: %w", err)
	}
	if err := EncodeGGUF(f, meta, tensors, 0); err != nil {
		f.Close()
		return fmt.Errorf("modeltest: write %s: %w", path, err)
	}
	return f.Close()
}

// Qwen35Weights gives spec's f32 weights keyed by GGUF name, as written
// (before quantization), for a reference forward pass.
func Qwen35Weights(spec Qwen35Spec) map[string][]float32 {
	s := spec.withDefaults()
	out := map[string][]float32{}
	for _, ts := range qwen35Tensors(s) {
		out[ts.name] = qwen35Weight(s, ts)
	}
	return out
}

// WithDefaults is spec with its zero fields filled as the writer fills them.
func (s Qwen35Spec) WithDefaults() Qwen35Spec { return s.withDefaults() }
