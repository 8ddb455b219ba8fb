package modeltest

import "fmt"

// gemma4TensorList is tensorList for a Gemma 4 spec: each layer's attention
// at its kind's head shape, the post-norms, the optional layer scales and
// the global layers' RoPE divisors.
func gemma4TensorList(s Spec, out []tensorShape) []tensorShape {
	add := func(name string, shape ...int) { out = append(out, tensorShape{name, shape}) }
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		hd, kvh, global := s.HeadDim(), s.KVHeads, !s.gemma4WindowLayer(l)
		if global {
			hd, kvh = s.HeadDimFull, s.KVHeadsFull
		}
		add(p+"attn_norm.weight", s.Hidden)
		add(p+"attn_q.weight", s.Heads*hd, s.Hidden)
		add(p+"attn_k.weight", kvh*hd, s.Hidden)
		if !global || !s.KEqV {
			add(p+"attn_v.weight", kvh*hd, s.Hidden)
		}
		add(p+"attn_q_norm.weight", hd)
		add(p+"attn_k_norm.weight", hd)
		add(p+"attn_output.weight", s.Hidden, s.Heads*hd)
		add(p+"post_attention_norm.weight", s.Hidden)
		ffn := s.gemma4FFN(l)
		add(p+"ffn_norm.weight", s.Hidden)
		add(p+"ffn_gate.weight", ffn, s.Hidden)
		add(p+"ffn_up.weight", ffn, s.Hidden)
		add(p+"ffn_down.weight", s.Hidden, ffn)
		add(p+"post_ffw_norm.weight", s.Hidden)
		if s.Experts > 0 {
			out = gemma4MoETensors(s, p, out)
		}
		if s.PerLayerEmbd > 0 {
			add(p+"inp_gate.weight", s.PerLayerEmbd, s.Hidden)
			add(p+"proj.weight", s.Hidden, s.PerLayerEmbd)
			add(p+"post_norm.weight", s.Hidden)
		}
		if s.LayerScale {
			add(p+"layer_output_scale.weight", 1)
		}
	}
	if s.PerLayerEmbd > 0 {
		add("per_layer_token_embd.weight", s.Vocab, s.Layers*s.PerLayerEmbd)
		add("per_layer_model_proj.weight", s.Layers*s.PerLayerEmbd, s.Hidden)
		add("per_layer_proj_norm.weight", s.PerLayerEmbd)
	}
	add("output_norm.weight", s.Hidden)
	// llama.cpp requires it (the global layers' divisors): all 1 without
	// PartialRotaryFull.
	add("rope_freqs.weight", s.HeadDimFull/2)
	return out
}

// gemma4WindowLayer says whether layer l is a window layer: all but every
// WindowPattern-th.
func (s Spec) gemma4WindowLayer(l int) bool { return l%s.WindowPattern < s.WindowPattern-1 }

// gemma4FFN is layer l's feed-forward width: doubled on the shared-K/V
// layers with DoubleWideMLP.
func (s Spec) gemma4FFN(l int) int {
	if s.DoubleWideMLP && l >= s.Layers-s.SharedKVLayers {
		return 2 * s.FFN
	}
	return s.FFN
}

// gemma4Meta is the gemma4.* metadata beyond the Llama keys WriteGGUF
// writes, with the head counts and rotary dims per layer kind replacing
// the Llama ones.
func gemma4Meta(s Spec, meta []KV) []KV {
	a := "gemma4."
	pattern := make([]bool, s.Layers)
	kvHeads := make([]int32, s.Layers)
	for l := range pattern {
		pattern[l] = s.gemma4WindowLayer(l)
		kvHeads[l] = int32(s.KVHeads)
		if !pattern[l] {
			kvHeads[l] = int32(s.KVHeadsFull)
		}
	}
	for i, kv := range meta {
		switch kv.Key {
		case a + "attention.head_count_kv":
			meta[i].Value = kvHeads
		case a + "rope.dimension_count":
			meta[i].Value = uint32(s.HeadDimFull)
		case a + "feed_forward_length":
			if s.DoubleWideMLP {
				ffn := make([]int32, s.Layers)
				for l := range ffn {
					ffn[l] = int32(s.gemma4FFN(l))
				}
				meta[i].Value = ffn
			}
		}
	}
	meta = append(meta,
		KV{a + "rope.dimension_count_swa", uint32(s.HeadDim())},
		KV{a + "rope.freq_base_swa", float32(10000)},
		KV{a + "attention.key_length", uint32(s.HeadDimFull)},
		KV{a + "attention.value_length", uint32(s.HeadDimFull)},
		KV{a + "attention.key_length_swa", uint32(s.HeadDim())},
		KV{a + "attention.value_length_swa", uint32(s.HeadDim())},
		KV{a + "attention.sliding_window", uint32(s.Window)},
		KV{a + "attention.sliding_window_pattern", pattern},
		KV{a + "attention.shared_kv_layers", uint32(s.SharedKVLayers)},
		KV{a + "embedding_length_per_layer_input", uint32(s.PerLayerEmbd)},
	)
	if s.FinalSoftcap > 0 {
		meta = append(meta, KV{a + "final_logit_softcapping", s.FinalSoftcap})
	}
	return meta
}

// gemma4MoETensors are a 26B-A4B layer's mixture beside its dense FFN, in
// llama.cpp's names: the router and its input scale, the branch norms, the
// experts (gate and up fused or apart) and their output scales.
func gemma4MoETensors(s Spec, p string, out []tensorShape) []tensorShape {
	add := func(name string, shape ...int) { out = append(out, tensorShape{name, shape}) }
	e, f := s.Experts, s.ExpertFFN
	add(p+"ffn_gate_inp.weight", e, s.Hidden)
	add(p+"ffn_gate_inp.scale", s.Hidden)
	add(p+"pre_ffw_norm_2.weight", s.Hidden)
	add(p+"post_ffw_norm_1.weight", s.Hidden)
	add(p+"post_ffw_norm_2.weight", s.Hidden)
	if s.FusedGateUpExps {
		add(p+"ffn_gate_up_exps.weight", e, 2*f, s.Hidden)
	} else {
		add(p+"ffn_gate_exps.weight", e, f, s.Hidden)
		add(p+"ffn_up_exps.weight", e, f, s.Hidden)
	}
	add(p+"ffn_down_exps.weight", e, s.Hidden, f)
	add(p+"ffn_down_exps.scale", e)
	return out
}
