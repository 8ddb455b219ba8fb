package models

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// Qwen3.5 from a Hugging Face checkpoint (Qwen3_5ForCausalLM, or the text
// model of Qwen3_5ForConditionalGeneration under model.language_model.*,
// its vision tower not loaded), exposed as the tensors
// llama.cpp's convert_hf_to_gguf writes for GGUF qwen35, so LoadQwen35's
// forward pass is shared:
//
//	linear_attn.in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj
//	                        → attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_out
//	linear_attn.conv1d.weight [C, 1, K] → ssm_conv1d.weight [C, K], F32
//	linear_attn.A_log       → ssm_a = −exp(A_log), F32
//	linear_attn.dt_bias     → ssm_dt.bias; linear_attn.norm.weight → ssm_norm.weight
//	post_attention_layernorm → post_attention_norm (the norm before the feed-forward)
//	the zero-centred RMSNorms (input_layernorm, post_attention_layernorm,
//	  model.norm, q_norm, k_norm) as 1 + w, F32; the gated norm stays w
//
// and, where there are more value heads than key heads, the value heads
// reordered: transformers gives value head g the key head g / (Hv/Hk)
// (repeat_interleave), the DeltaNet kernels (as ggml) h mod Hk, so GGUF
// head j·Hk + k is checkpoint head k·(Hv/Hk) + j, in every tensor with a
// row, column or entry per value head (the V rows of in_proj_qkv and of the
// convolution, in_proj_z, in_proj_b, in_proj_a, A_log, dt_bias and the
// columns of out_proj). The MTP block (mtp.*, mtp_num_hidden_layers) is
// renamed as convert_hf_to_gguf renames it, to block blk.<num_hidden_layers>:
//
//	mtp.layers.0.*          → the layer's own names, as model.layers.<n>.*
//	mtp.fc                  → nextn.eh_proj
//	mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.norm
//	                        → nextn.enorm, nextn.hnorm, nextn.shared_head_norm (1 + w)

// isHFQwen35 says whether config.json's architecture is a Qwen3.5 one.
func isHFQwen35(arch string) bool {
	return arch == "Qwen3_5ForCausalLM" || arch == "Qwen3_5ForConditionalGeneration" || isHFQwen35MoE(arch)
}

// isHFQwen35MoE says whether it is Qwen3.5's mixture of experts (qwen35moe).
func isHFQwen35MoE(arch string) bool {
	return arch == "Qwen3_5MoeForCausalLM" || arch == "Qwen3_5MoeForConditionalGeneration"
}

// hfQwen35Config is the part of a Qwen3.5 config.json (or its text_config)
// the model needs.
type hfQwen35Config struct {
	Architectures         []string        `json:"architectures"`
	TextConfig            json.RawMessage `json:"text_config"`
	VocabSize             int             `json:"vocab_size"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      int             `json:"num_key_value_heads"`
	HeadDim               int             `json:"head_dim"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	RMSNormEps            float64         `json:"rms_norm_eps"`
	HiddenAct             string          `json:"hidden_act"`
	AttentionBias         bool            `json:"attention_bias"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	LayerTypes            []string        `json:"layer_types"`
	FullAttentionInterval *int            `json:"full_attention_interval"`
	RopeTheta             *float64        `json:"rope_theta"`
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor"`
	RopeParameters        *struct {
		RopeType            string   `json:"rope_type"`
		RopeTheta           *float64 `json:"rope_theta"`
		PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
	} `json:"rope_parameters"`
	// Qwen3_5MoeTextConfig: every layer's feed-forward is a renormalised
	// top-k mixture beside a shared expert behind a sigmoid gate.
	NumExperts                   int `json:"num_experts"`
	NumExpertsPerTok             int `json:"num_experts_per_tok"`
	MoEIntermediateSize          int `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize int `json:"shared_expert_intermediate_size"`

	LinearConvKernelDim int `json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim    int `json:"linear_key_head_dim"`
	LinearValueHeadDim  int `json:"linear_value_head_dim"`
	LinearNumKeyHeads   int `json:"linear_num_key_heads"`
	LinearNumValueHeads int `json:"linear_num_value_heads"`

	MTPNumHiddenLayers int `json:"mtp_num_hidden_layers"`
}

// qwen35TextDefaults is transformers' Qwen3_5TextConfig with nothing set.
func qwen35TextDefaults() hfQwen35Config {
	return hfQwen35Config{
		VocabSize: 248320, HiddenSize: 4096, IntermediateSize: 12288, NumHiddenLayers: 32, NumAttentionHeads: 16,
		NumKeyValueHeads: 4, HeadDim: 256, MaxPositionEmbeddings: 32768, RMSNormEps: 1e-6, HiddenAct: "silu",
		LinearConvKernelDim: 4, LinearKeyHeadDim: 128, LinearValueHeadDim: 128, LinearNumKeyHeads: 16, LinearNumValueHeads: 32,
	}
}

// qwen35MoETextDefaults is transformers' Qwen3_5MoeTextConfig with nothing
// set (it has no dense intermediate_size).
func qwen35MoETextDefaults() hfQwen35Config {
	hc := qwen35TextDefaults()
	hc.HiddenSize, hc.IntermediateSize, hc.NumHiddenLayers, hc.NumKeyValueHeads = 2048, 0, 40, 2
	hc.NumExperts, hc.NumExpertsPerTok, hc.MoEIntermediateSize, hc.SharedExpertIntermediateSize = 256, 8, 512, 512
	return hc
}

// readHFQwen35 reads dir/config.json over transformers' defaults, from
// text_config where there is one; tie is the top level's
// tie_word_embeddings (Qwen3_5Config's) when the text part lacks one.
func readHFQwen35(dir string) (hfQwen35Config, string, error) {
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return hfQwen35Config{}, path, fmt.Errorf("hf config: %w", err)
	}
	var top hfQwen35Config
	if err := json.Unmarshal(raw, &top); err != nil {
		return hfQwen35Config{}, path, fmt.Errorf("hf config %s: %w: %w", path, ErrMalformed, err)
	}
	text := raw
	if top.TextConfig != nil {
		text = top.TextConfig
	} else if len(top.Architectures) > 0 && top.Architectures[0] == "Qwen3_5ForConditionalGeneration" {
		return hfQwen35Config{}, path, fmt.Errorf("hf config %s: Qwen3_5ForConditionalGeneration without text_config: %w", path, ErrMissingKey)
	}
	hc := qwen35TextDefaults()
	if len(top.Architectures) > 0 && isHFQwen35MoE(top.Architectures[0]) {
		hc = qwen35MoETextDefaults()
	}
	if err := json.Unmarshal(text, &hc); err != nil {
		return hfQwen35Config{}, path, fmt.Errorf("hf config %s: text_config: %w: %w", path, ErrMalformed, err)
	}
	hc.Architectures = top.Architectures
	if hc.TieWordEmbeddings == nil {
		hc.TieWordEmbeddings = top.TieWordEmbeddings
	}
	return hc, path, nil
}

// Qwen35Config reads a Qwen3.5 checkpoint's config.json as
// GGUFFile.Qwen35Config reads a qwen35 file's metadata.
func (h *HFDir) Qwen35Config() (Qwen35Config, error) {
	hc, path, err := readHFQwen35(h.dir)
	if err != nil {
		return Qwen35Config{}, err
	}
	fail := func(sentinel error, format string, args ...any) (Qwen35Config, error) {
		return Qwen35Config{}, fmt.Errorf("hf config %s: %s: %w", path, fmt.Sprintf(format, args...), sentinel)
	}
	if len(hc.Architectures) == 0 || !isHFQwen35(hc.Architectures[0]) {
		return fail(ErrUnsupported, "architectures %v is not Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM or their ForConditionalGeneration", hc.Architectures)
	}
	switch {
	case hc.HiddenAct != "silu":
		return fail(ErrUnsupported, "hidden_act %q (Qwen3.5's feed-forward and convolution are silu)", hc.HiddenAct)
	case hc.AttentionBias:
		return fail(ErrUnsupported, "attention_bias true (Qwen3.5's attention has no biases)")
	case hc.LinearKeyHeadDim != hc.LinearValueHeadDim:
		return fail(ErrUnsupported, "linear_key_head_dim %d ≠ linear_value_head_dim %d (the DeltaNet kernels take one head size)",
			hc.LinearKeyHeadDim, hc.LinearValueHeadDim)
	}
	theta, prf := 10000.0, 0.25 // PreTrainedConfig's default base; Qwen3_5TextConfig's rotary share
	if hc.RopeTheta != nil {
		theta = *hc.RopeTheta
	}
	if hc.PartialRotaryFactor != nil {
		prf = *hc.PartialRotaryFactor
	}
	if rp := hc.RopeParameters; rp != nil {
		// mrope_section splits the rotary pairs between time, height and
		// width positions, which are one position for text: plain RoPE.
		if t := cmp.Or(rp.RopeType, "default"); t != "default" {
			return fail(ErrUnsupported, "rope_parameters.rope_type %q (want default)", t)
		}
		if rp.RopeTheta != nil {
			theta = *rp.RopeTheta
		}
		if rp.PartialRotaryFactor != nil {
			prf = *rp.PartialRotaryFactor
		}
	}
	arch := "qwen35"
	c := Qwen35Config{
		Arch: arch, Layers: hc.NumHiddenLayers, Hidden: hc.HiddenSize, FFN: hc.IntermediateSize, Vocab: hc.VocabSize,
		Heads: hc.NumAttentionHeads, KVHeads: hc.NumKeyValueHeads, HeadDim: hc.HeadDim,
		RopeDims: int(float64(hc.HeadDim) * prf), ContextLen: hc.MaxPositionEmbeddings,
		RMSEps: float32(hc.RMSNormEps), RopeTheta: float32(theta),
		DeltaNet: kernels.DeltaNetShape{Kernel: hc.LinearConvKernelDim, HeadDim: hc.LinearKeyHeadDim,
			KHeads: hc.LinearNumKeyHeads, VHeads: hc.LinearNumValueHeads, Eps: float32(hc.RMSNormEps)},
		TiedEmbeddings: !h.Has("output.weight") || hc.TieWordEmbeddings != nil && *hc.TieWordEmbeddings,
	}
	if isHFQwen35MoE(hc.Architectures[0]) {
		c.Arch = "qwen35moe"
		c.Experts, c.ExpertsUsed, c.ExpertFFN, c.SharedFFN = hc.NumExperts, hc.NumExpertsPerTok, hc.MoEIntermediateSize, hc.SharedExpertIntermediateSize
		if c.FFN <= 0 {
			c.FFN = c.ExpertFFN // no dense feed-forward; the field only has to be positive
		}
		if c.ExpertFFN <= 0 {
			return fail(ErrMalformed, "moe_intermediate_size %d", c.ExpertFFN)
		}
	}
	if !(theta > 0) || !(prf > 0 && prf <= 1) {
		return fail(ErrMalformed, "rope_theta %g, partial_rotary_factor %g", theta, prf)
	}
	c.Recurrent = make([]bool, max(c.Layers, 0))
	switch {
	case hc.LayerTypes != nil:
		if len(hc.LayerTypes) != c.Layers {
			return fail(ErrMalformed, "%d layer_types for %d layers", len(hc.LayerTypes), c.Layers)
		}
		for i, t := range hc.LayerTypes {
			if t != "linear_attention" && t != "full_attention" {
				return fail(ErrMalformed, "layer_types[%d] = %q (want linear_attention or full_attention)", i, t)
			}
			c.Recurrent[i] = t == "linear_attention"
		}
	default:
		n := 4
		if hc.FullAttentionInterval != nil {
			n = *hc.FullAttentionInterval
		}
		if n <= 0 {
			return fail(ErrMalformed, "full_attention_interval %d", n)
		}
		for i := range c.Recurrent {
			c.Recurrent[i] = (i+1)%n != 0
		}
	}
	if err := c.finish(); err != nil {
		return Qwen35Config{}, fmt.Errorf("hf config %s: %w", path, err)
	}
	if hc.MTPNumHiddenLayers > 0 && h.Has(fmt.Sprintf("blk.%d.nextn.eh_proj.weight", c.Layers)) {
		c.MTPLayers = hc.MTPNumHiddenLayers // a checkpoint may ship without the head's tensors: then none
	}
	return c, nil
}

var hfFusedExperts = regexp.MustCompile(`^model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)$`)

var hfLinearAttn = regexp.MustCompile(`^model\.layers\.(\d+)\.linear_attn\.(in_proj_qkv\.weight|in_proj_z\.weight|in_proj_b\.weight|in_proj_a\.weight|out_proj\.weight|conv1d\.weight|A_log|dt_bias|norm\.weight)$`)

// qwen35Tensors renames a Qwen3.5 checkpoint's tensors to GGUF's and sets
// up the derived ones (see the comment at the top).
func (h *HFDir) qwen35Tensors() error {
	hc, _, err := readHFQwen35(h.dir)
	if err != nil {
		return nil // Config reports it
	}
	h.qwen35MTPTensors(hc.NumHiddenLayers)
	hk, hv, S := hc.LinearNumKeyHeads, hc.LinearNumValueHeads, hc.LinearValueHeadDim
	if hk <= 0 || hv <= 0 || hv%hk != 0 || S <= 0 {
		return nil // Qwen35Config refuses the shape
	}
	perm := make([]int, hv) // GGUF value head t is checkpoint head perm[t]
	for t := range perm {
		perm[t] = (t%hk)*(hv/hk) + t/hk
	}
	fail := func(e stEntry, format string, args ...any) error {
		return fmt.Errorf("safetensors %s: %q: %s: %w", h.files[e.file], e.hfName, fmt.Sprintf(format, args...), ErrMalformed)
	}
	for _, name := range sortedKeys(h.tensors) {
		e := h.tensors[name]
		m := hfLinearAttn.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		delete(h.tensors, name)
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return fail(e, "layer %q", m[1])
		}
		p := fmt.Sprintf("blk.%d.", n)
		dt, ok := stDTypes[e.dtype]
		if !ok {
			return fmt.Errorf("safetensors %s: %q: dtype %s (want F32, F16 or BF16): %w", h.files[e.file], e.hfName, e.dtype, ErrUnsupported)
		}
		es := dt.RowBytes(1)
		rowBytes := 0
		if len(e.shape) > 0 {
			rowBytes = dt.RowBytes(e.shape[len(e.shape)-1])
		}
		// rows: permute whole rows, lead bytes first kept (Q and K of
		// in_proj_qkv); with as many value heads as key heads the order is
		// already the kernels', and the mapped tensor is used as it lies.
		rows := func(gguf string, lead, unit int) {
			if hv == hk {
				h.tensors[p+gguf] = e
				return
			}
			h.derived[p+gguf] = hfDerived{dtype: dt, shape: append([]int(nil), e.shape...), from: []stEntry{e},
				build: func(dst []byte, src [][]byte) error {
					permuteHeads(dst, src[0], lead, perm, unit)
					return nil
				}}
		}
		switch part := m[2]; part {
		case "in_proj_qkv.weight":
			if len(e.shape) != 2 || e.shape[0] != (2*hk+hv)*S {
				return fail(e, "shape %v (want [%d, hidden])", e.shape, (2*hk+hv)*S)
			}
			rows("attn_qkv.weight", 2*hk*S*rowBytes, S*rowBytes)
		case "in_proj_z.weight":
			if len(e.shape) != 2 || e.shape[0] != hv*S {
				return fail(e, "shape %v (want [%d, hidden])", e.shape, hv*S)
			}
			rows("attn_gate.weight", 0, S*rowBytes)
		case "in_proj_b.weight", "in_proj_a.weight":
			if len(e.shape) != 2 || e.shape[0] != hv {
				return fail(e, "shape %v (want [%d, hidden])", e.shape, hv)
			}
			rows(map[string]string{"in_proj_b.weight": "ssm_beta.weight", "in_proj_a.weight": "ssm_alpha.weight"}[part], 0, rowBytes)
		case "out_proj.weight":
			if len(e.shape) != 2 || e.shape[1] != hv*S {
				return fail(e, "shape %v (want [hidden, %d])", e.shape, hv*S)
			}
			if hv == hk {
				h.tensors[p+"ssm_out.weight"] = e
				continue
			}
			h.derived[p+"ssm_out.weight"] = hfDerived{dtype: dt, shape: append([]int(nil), e.shape...), from: []stEntry{e},
				build: func(dst []byte, src [][]byte) error {
					for r := range e.shape[0] {
						permuteHeads(dst[r*rowBytes:(r+1)*rowBytes], src[0][r*rowBytes:(r+1)*rowBytes], 0, perm, S*es)
					}
					return nil
				}}
		case "conv1d.weight":
			if len(e.shape) != 3 || e.shape[0] != (2*hk+hv)*S || e.shape[1] != 1 {
				return fail(e, "shape %v (want [%d, 1, kernel])", e.shape, (2*hk+hv)*S)
			}
			k := e.shape[2]
			h.derived[p+"ssm_conv1d.weight"] = f32Derived(e, dt, []int{e.shape[0], k}, func(v []float32) []float32 {
				out := make([]float32, len(v))
				copy(out, v[:2*hk*S*k])
				for t, g := range perm {
					copy(out[(2*hk*S+t*S)*k:(2*hk*S+(t+1)*S)*k], v[(2*hk*S+g*S)*k:(2*hk*S+(g+1)*S)*k])
				}
				return out
			})
		case "A_log", "dt_bias":
			if len(e.shape) != 1 || e.shape[0] != hv {
				return fail(e, "shape %v (want [%d])", e.shape, hv)
			}
			neg := part == "A_log"
			gguf := map[bool]string{true: "ssm_a", false: "ssm_dt.bias"}[neg]
			h.derived[p+gguf] = f32Derived(e, dt, e.shape, func(v []float32) []float32 {
				out := make([]float32, hv)
				for t, g := range perm {
					out[t] = v[g]
					if neg {
						out[t] = -float32(math.Exp(float64(v[g])))
					}
				}
				return out
			})
		case "norm.weight":
			h.tensors[p+"ssm_norm.weight"] = e // the gated norm multiplies by w itself
		}
	}
	// Experts as transformers 5 saves them: gate_up_proj [E, 2·ffn, hidden]
	// (the gate's rows, then the up's) and down_proj [E, hidden, ffn], GGUF's
	// layout but for the split.
	for _, name := range sortedKeys(h.tensors) {
		m := hfFusedExperts.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		e := h.tensors[name]
		delete(h.tensors, name)
		p := "blk." + m[1] + "."
		dt, ok := stDTypes[e.dtype]
		if !ok || len(e.shape) != 3 {
			return fmt.Errorf("safetensors %s: %q: %s %v (want F32, F16 or BF16 [experts, rows, cols]): %w", h.files[e.file], e.hfName, e.dtype, e.shape, ErrUnsupported)
		}
		if m[2] == "down_proj" {
			h.tensors[p+"ffn_down_exps.weight"] = e
			continue
		}
		if e.shape[1]%2 != 0 {
			return fail(e, "shape %v (want [experts, 2·ffn, hidden])", e.shape)
		}
		ne, f, hidden := e.shape[0], e.shape[1]/2, e.shape[2]
		for half, kind := range []string{"gate", "up"} {
			h.derived[p+"ffn_"+kind+"_exps.weight"] = hfDerived{dtype: dt, shape: []int{ne, f, hidden}, from: []stEntry{e},
				build: func(dst []byte, src [][]byte) error {
					per := f * dt.RowBytes(hidden)
					for x := range ne {
						copy(dst[x*per:(x+1)*per], src[0][(2*x+half)*per:(2*x+half+1)*per])
					}
					return nil
				}}
		}
	}
	// The zero-centred norms, and post_attention_layernorm's GGUF name.
	for _, name := range sortedKeys(h.tensors) {
		layer, isPost := strings.CutSuffix(name, "ffn_norm.weight")
		target := name
		if isPost {
			target = layer + "post_attention_norm.weight"
		}
		if !isPost && name != "output_norm.weight" && !strings.HasSuffix(name, ".attn_norm.weight") &&
			!strings.HasSuffix(name, ".attn_q_norm.weight") && !strings.HasSuffix(name, ".attn_k_norm.weight") {
			continue
		}
		e := h.tensors[name]
		dt, ok := stDTypes[e.dtype]
		if !ok {
			return fmt.Errorf("safetensors %s: %q: dtype %s (want F32, F16 or BF16): %w", h.files[e.file], e.hfName, e.dtype, ErrUnsupported)
		}
		delete(h.tensors, name)
		h.derived[target] = f32Derived(e, dt, e.shape, func(v []float32) []float32 {
			for i := range v {
				v[i]++
			}
			return v
		})
	}
	return nil
}

// qwen35MTPTensors renames the MTP block's mtp.* (or model.mtp.*) tensors
// to blk.<layers>'s (see the comment at the top); its layer's go through
// the trunk layers' renaming, experts included, so that the renames below
// (DeltaNet, fused experts, the zero-centred norms) see them as a layer's.
func (h *HFDir) qwen35MTPTensors(layers int) {
	nextn := map[string]string{"fc.weight": "nextn.eh_proj.weight", "pre_fc_norm_embedding.weight": "nextn.enorm.weight",
		"pre_fc_norm_hidden.weight": "nextn.hnorm.weight", "norm.weight": "nextn.shared_head_norm.weight"}
	for _, name := range sortedKeys(h.tensors) {
		rest, ok := strings.CutPrefix(strings.TrimPrefix(name, "model."), "mtp.")
		if !ok {
			continue
		}
		e := h.tensors[name]
		delete(h.tensors, name)
		if part, ok := nextn[rest]; ok {
			g := fmt.Sprintf("blk.%d.%s", layers, part)
			if strings.HasSuffix(part, "norm.weight") {
				if dt, ok := stDTypes[e.dtype]; ok {
					h.derived[g] = f32Derived(e, dt, e.shape, func(v []float32) []float32 {
						for i := range v {
							v[i]++
						}
						return v
					})
					continue
				}
			}
			h.tensors[g] = e
			continue
		}
		var n int
		var tail string
		if _, err := fmt.Sscanf(rest, "layers.%d.%s", &n, &tail); err != nil {
			h.tensors[name] = e // not the head's: left as it was
			continue
		}
		hfName := fmt.Sprintf("model.layers.%d.%s", layers+n, tail)
		if stacked, expert, ok := hfExpertName(hfName); ok {
			h.addExpert(stacked, expert, e)
			continue
		}
		g := hfToGGUF(hfName)
		sharedGateShape(g, &e)
		h.tensors[g] = e
	}
}

// permuteHeads copies src to dst keeping its first lead bytes and then
// placing, for each t, src's block perm[t] (unit bytes each) at block t.
func permuteHeads(dst, src []byte, lead int, perm []int, unit int) {
	copy(dst[:lead], src[:lead])
	for t, g := range perm {
		copy(dst[lead+t*unit:lead+(t+1)*unit], src[lead+g*unit:lead+(g+1)*unit])
	}
}

// f32Derived is e read as F32, shaped shape, through f.
func f32Derived(e stEntry, dt kernels.DType, shape []int, f func([]float32) []float32) hfDerived {
	return hfDerived{dtype: kernels.F32, shape: append([]int(nil), shape...), from: []stEntry{e}, build: func(dst []byte, src [][]byte) error {
		vals := make([]float32, len(dst)/4)
		if err := quant.Dequantize(dt, src[0], vals); err != nil {
			return err
		}
		for i, v := range f(vals) {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return nil
	}}
}
