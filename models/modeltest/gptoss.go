package modeltest

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/kernels"
)

// gptossTensorList is tensorList for a gpt-oss spec: biased attention with
// a sink per head, post_attention_norm before a biased router and experts
// with biases, an untied head.
func gptossTensorList(s Spec, out []tensorShape) []tensorShape {
	hd, e, f := s.HeadDim(), s.Experts, s.ExpertFFN
	add := func(name string, shape ...int) { out = append(out, tensorShape{name, shape}) }
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", s.Hidden)
		add(p+"attn_q.weight", s.Heads*hd, s.Hidden)
		add(p+"attn_q.bias", s.Heads*hd)
		add(p+"attn_k.weight", s.KVHeads*hd, s.Hidden)
		add(p+"attn_k.bias", s.KVHeads*hd)
		add(p+"attn_v.weight", s.KVHeads*hd, s.Hidden)
		add(p+"attn_v.bias", s.KVHeads*hd)
		add(p+"attn_output.weight", s.Hidden, s.Heads*hd)
		add(p+"attn_output.bias", s.Hidden)
		add(p+"attn_sinks.weight", s.Heads)
		add(p+"post_attention_norm.weight", s.Hidden)
		add(p+"ffn_gate_inp.weight", e, s.Hidden)
		add(p+"ffn_gate_inp.bias", e)
		add(p+"ffn_gate_exps.weight", e, f, s.Hidden)
		add(p+"ffn_gate_exps.bias", e, f)
		add(p+"ffn_up_exps.weight", e, f, s.Hidden)
		add(p+"ffn_up_exps.bias", e, f)
		add(p+"ffn_down_exps.weight", e, s.Hidden, f)
		add(p+"ffn_down_exps.bias", e, s.Hidden)
	}
	add("output_norm.weight", s.Hidden)
	add("output.weight", s.Vocab, s.Hidden)
	return out
}

// gptossDType is the type WriteGGUF stores a gpt-oss tensor in: biases F32
// whatever their rank, the experts in MXFP4 with ExpertsMXFP4.
func gptossDType(s Spec, name string, dt kernels.DType) kernels.DType {
	switch {
	case strings.HasSuffix(name, ".bias"):
		return kernels.F32
	case s.ExpertsMXFP4 && strings.HasSuffix(name, "_exps.weight"):
		return kernels.MXFP4
	}
	return dt
}

// gptossMeta is the gpt-oss.* metadata beyond the Llama keys WriteGGUF
// writes: the window (every other layer, from llama.cpp's default pattern)
// and YaRN.
func gptossMeta(s Spec, meta []KV) []KV {
	a := "gpt-oss."
	meta = append(meta,
		KV{a + "attention.key_length", uint32(s.HeadDim())},
		KV{a + "attention.value_length", uint32(s.HeadDim())},
		KV{a + "attention.sliding_window", uint32(s.Window)},
	)
	if y := s.YaRN; y != nil {
		meta = append(meta, KV{a + "rope.scaling.type", "yarn"}, KV{a + "rope.scaling.factor", y.Factor},
			KV{a + "rope.scaling.original_context_length", uint32(y.OriginalContext)})
	}
	return meta
}
