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
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
)

// gpt-oss from a Hugging Face checkpoint (GptOssForCausalLM). Attention,
// router and norms have one tensor each, renamed as the Llama family's
// (hfLayerParts: self_attn.sinks, o_proj.bias, mlp.router); the
// feed-forward's norm is post_attention_layernorm, which gpt-oss's loader
// reads as post_attention_norm. Each layer's experts are fused, in one of
// two layouts:
//
//	dense (a checkpoint saved by transformers, BF16 or F32):
//	  mlp.experts.gate_up_proj [E, hidden, 2·ffn], gate in the even columns, up in the odd
//	  mlp.experts.down_proj    [E, ffn, hidden]
//	MXFP4 (openai/gpt-oss-20b and -120b as released):
//	  mlp.experts.gate_up_proj_blocks [E, 2·ffn, hidden/32, 16] U8, _scales [E, 2·ffn, hidden/32] U8
//	  mlp.experts.down_proj_blocks    [E, hidden, ffn/32, 16] U8,   _scales [E, hidden, ffn/32] U8
//	  (rows as a Linear's, gate and up rows interleaved; block byte k holds
//	  elements 2k, low nibble, and 2k+1; the scale is an E8M0 exponent)
//	biases: mlp.experts.gate_up_proj_bias [E, 2·ffn] (interleaved), down_proj_bias [E, hidden]
//
// HFDir exposes them as GGUF's blk.N.ffn_{gate,up,down}_exps.{weight,bias}:
// the dense ones split and transposed in their own type, the MXFP4 ones
// regrouped into ggml's block_mxfp4 (the same E8M0 byte; byte j holding
// elements j and j+16), which the MXFP4 kernels read as they read a GGUF
// file's, and the biases as F32. Each is built when the loader asks for it,
// not kept.

// hfDerived is a tensor HFDir computes from checkpoint tensors on request.
type hfDerived struct {
	dtype kernels.DType
	shape []int
	from  []stEntry
	// build fills dst (the whole tensor) from the from entries' mapped bytes.
	build func(dst []byte, src [][]byte) error
}

var gptossExpertTensor = regexp.MustCompile(`^model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)(_blocks|_scales|_bias)?$`)

// hfArchitecture is config.json's architectures[0], "" when unreadable
// (Config reports why).
func hfArchitecture(dir string) string {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return ""
	}
	var hc struct {
		Architectures []string `json:"architectures"`
	}
	if json.Unmarshal(raw, &hc) != nil || len(hc.Architectures) == 0 {
		return ""
	}
	return hc.Architectures[0]
}

// gptossTensors replaces a gpt-oss checkpoint's fused expert tensors by
// derived GGUF-named ones and renames the feed-forward norm.
func (h *HFDir) gptossTensors() error {
	type layerExperts map[string]stEntry // "gate_up_proj_blocks" → entry
	layers := map[int]layerExperts{}
	for _, name := range sortedKeys(h.tensors) {
		m := gptossExpertTensor.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return fmt.Errorf("hf %s: %q: %w", h.dir, name, ErrMalformed)
		}
		if layers[n] == nil {
			layers[n] = layerExperts{}
		}
		layers[n][m[2]+m[3]] = h.tensors[name]
		delete(h.tensors, name)
	}
	for n, ex := range layers {
		p := fmt.Sprintf("blk.%d.", n)
		fail := func(format string, args ...any) error {
			return fmt.Errorf("hf %s: layer %d's experts: %s: %w", h.dir, n, fmt.Sprintf(format, args...), ErrMalformed)
		}
		gu, gub, d, db := ex["gate_up_proj"], ex["gate_up_proj_bias"], ex["down_proj"], ex["down_proj_bias"]
		if gub.hfName == "" || db.hfName == "" {
			return fail("gate_up_proj_bias and down_proj_bias are both required")
		}
		if len(gub.shape) != 2 || gub.shape[1]%2 != 0 || len(db.shape) != 2 || gub.shape[0] != db.shape[0] {
			return fail("biases %v and %v (want [experts, 2·ffn] and [experts, hidden])", gub.shape, db.shape)
		}
		e, f, hidden := gub.shape[0], gub.shape[1]/2, db.shape[1]
		gateB, upB, err := splitBias(gub, e, f)
		if err != nil {
			return fail("%v", err)
		}
		h.derived[p+"ffn_gate_exps.bias"], h.derived[p+"ffn_up_exps.bias"] = gateB, upB
		if h.derived[p+"ffn_down_exps.bias"], err = f32Bias(db); err != nil {
			return fail("%v", err)
		}
		switch blocks, scales := ex["gate_up_proj_blocks"], ex["gate_up_proj_scales"]; {
		case gu.hfName != "" && d.hfName != "" && blocks.hfName == "":
			if gu.dtype != d.dtype || !slices.Equal(gu.shape, []int{e, hidden, 2 * f}) || !slices.Equal(d.shape, []int{e, f, hidden}) {
				return fail("gate_up_proj %s %v and down_proj %s %v (want one type, [%d %d %d] and [%d %d %d])",
					gu.dtype, gu.shape, d.dtype, d.shape, e, hidden, 2*f, e, f, hidden)
			}
			dt, ok := stDTypes[gu.dtype]
			if !ok {
				return fmt.Errorf("hf %s: %s: dtype %s (want F32, F16 or BF16): %w", h.dir, gu.hfName, gu.dtype, ErrUnsupported)
			}
			for half, kind := range []string{"gate", "up"} {
				h.derived[p+"ffn_"+kind+"_exps.weight"] = hfDerived{dtype: dt, shape: []int{e, f, hidden}, from: []stEntry{gu},
					build: func(dst []byte, src [][]byte) error {
						transposeElems(dst, src[0], e, hidden, 2*f, 2, half, dt.RowBytes(1))
						return nil
					}}
			}
			h.derived[p+"ffn_down_exps.weight"] = hfDerived{dtype: dt, shape: []int{e, hidden, f}, from: []stEntry{d},
				build: func(dst []byte, src [][]byte) error {
					transposeElems(dst, src[0], e, f, hidden, 1, 0, dt.RowBytes(1))
					return nil
				}}
		case gu.hfName == "" && d.hfName == "" && blocks.hfName != "":
			db, ds := ex["down_proj_blocks"], ex["down_proj_scales"]
			if err := checkMXFP4(blocks, scales, e, 2*f, hidden); err != nil {
				return fail("gate_up_proj: %v", err)
			}
			if err := checkMXFP4(db, ds, e, hidden, f); err != nil {
				return fail("down_proj: %v", err)
			}
			for half, kind := range []string{"gate", "up"} {
				h.derived[p+"ffn_"+kind+"_exps.weight"] = hfDerived{dtype: kernels.MXFP4, shape: []int{e, f, hidden}, from: []stEntry{blocks, scales},
					build: func(dst []byte, src [][]byte) error {
						mxfp4Rows(dst, src[0], src[1], e*f, hidden/32, 2, half)
						return nil
					}}
			}
			h.derived[p+"ffn_down_exps.weight"] = hfDerived{dtype: kernels.MXFP4, shape: []int{e, hidden, f}, from: []stEntry{db, ds},
				build: func(dst []byte, src [][]byte) error {
					mxfp4Rows(dst, src[0], src[1], e*hidden, f/32, 1, 0)
					return nil
				}}
		default:
			return fail("want gate_up_proj and down_proj, or their _blocks and _scales (MXFP4), and not both")
		}
		if norm, ok := h.tensors[p+"ffn_norm.weight"]; ok {
			h.tensors[p+"post_attention_norm.weight"] = norm
			delete(h.tensors, p+"ffn_norm.weight")
		}
	}
	return nil
}

// checkMXFP4 checks an MXFP4 pair for [experts, rows, cols] values.
func checkMXFP4(blocks, scales stEntry, experts, rows, cols int) error {
	switch {
	case blocks.hfName == "" || scales.hfName == "":
		return fmt.Errorf("_blocks without _scales or the reverse")
	case cols%32 != 0:
		return fmt.Errorf("rows of %d are not whole MXFP4 blocks of 32", cols)
	case blocks.dtype != "U8" || scales.dtype != "U8":
		return fmt.Errorf("_blocks %s and _scales %s (want U8)", blocks.dtype, scales.dtype)
	case !slices.Equal(blocks.shape, []int{experts, rows, cols / 32, 16}) || !slices.Equal(scales.shape, []int{experts, rows, cols / 32}):
		return fmt.Errorf("_blocks %v and _scales %v (want [%d %d %d 16] and [%d %d %d])", blocks.shape, scales.shape,
			experts, rows, cols/32, experts, rows, cols/32)
	}
	return nil
}

// mxfp4Rows writes rows of groups blocks as ggml's block_mxfp4, taking
// every stride-th source row from offset (2 and 0 or 1: gate_up_proj's gate
// or up rows).
func mxfp4Rows(dst, blocks, scales []byte, rows, groups, stride, offset int) {
	for r := range rows {
		src := (r*stride + offset) * groups
		for g := range groups {
			out := dst[(r*groups+g)*quant.MXFP4BlockBytes:]
			out[0] = scales[src+g]
			in := blocks[(src+g)*16 : (src+g+1)*16]
			for j := range 16 {
				// element j from byte j/2, element j+16 from byte 8+j/2; even
				// elements in the low nibbles
				lo, hi := in[j/2]>>(4*(j%2))&0xf, in[8+j/2]>>(4*(j%2))&0xf
				out[1+j] = lo | hi<<4
			}
		}
	}
}

// transposeElems writes, for each of n source matrices [r, c] of elements
// size bytes wide, the transpose of its columns offset, offset+stride, …
// (stride 2: gate_up_proj's gate or up columns) into dst [n, c/stride, r].
func transposeElems(dst, src []byte, n, r, c, stride, offset, size int) {
	cols := c / stride
	for m := range n {
		for i := range r {
			for j := range cols {
				s := ((m*r+i)*c + j*stride + offset) * size
				o := ((m*cols+j)*r + i) * size
				copy(dst[o:o+size], src[s:s+size])
			}
		}
	}
}

// splitBias is gate_up_proj_bias as F32 gate and up biases [experts, ffn].
func splitBias(b stEntry, e, f int) (gate, up hfDerived, err error) {
	dt, ok := stDTypes[b.dtype]
	if !ok {
		return gate, up, fmt.Errorf("%s: dtype %s (want F32, F16 or BF16)", b.hfName, b.dtype)
	}
	for half, d := range []*hfDerived{&gate, &up} {
		*d = hfDerived{dtype: kernels.F32, shape: []int{e, f}, from: []stEntry{b}, build: func(dst []byte, src [][]byte) error {
			all := make([]float32, 2*e*f)
			if err := quant.Dequantize(dt, src[0], all); err != nil {
				return err
			}
			for i := range e * f {
				binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(all[2*i+half]))
			}
			return nil
		}}
	}
	return gate, up, nil
}

// f32Bias is b as F32 (the expert kernels read F32 biases).
func f32Bias(b stEntry) (hfDerived, error) {
	dt, ok := stDTypes[b.dtype]
	if !ok {
		return hfDerived{}, fmt.Errorf("%s: dtype %s (want F32, F16 or BF16)", b.hfName, b.dtype)
	}
	return hfDerived{dtype: kernels.F32, shape: append([]int(nil), b.shape...), from: []stEntry{b}, build: func(dst []byte, src [][]byte) error {
		vals := make([]float32, len(dst)/4)
		if err := quant.Dequantize(dt, src[0], vals); err != nil {
			return err
		}
		for i, v := range vals {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return nil
	}}, nil
}

// bytes is the built tensor's size.
func (d hfDerived) bytes() uint64 {
	n := 1
	for _, s := range d.shape {
		n *= s
	}
	return uint64(d.dtype.RowBytes(n))
}

// derivedTensor builds a derived tensor into a new buffer, releasing the
// source tensors' mapped pages once read (as stackedTensor does).
func (h *HFDir) derivedTensor(name string, d hfDerived) (kernels.HostTensor, error) {
	if h.maps == nil {
		return kernels.HostTensor{}, fmt.Errorf("hf %s: tensor %q: %w", h.dir, name, ErrClosed)
	}
	buf := make([]byte, d.bytes())
	src := make([][]byte, len(d.from))
	for i, e := range d.from {
		src[i] = h.maps[e.file][e.begin:e.end]
	}
	if err := d.build(buf, src); err != nil {
		return kernels.HostTensor{}, fmt.Errorf("hf %s: tensor %q: %w", h.dir, name, err)
	}
	for _, e := range d.from {
		releasePages(h.maps[e.file], e.begin, e.end)
	}
	return kernels.HostTensor{Name: name, DType: d.dtype, Shape: append([]int(nil), d.shape...), Data: buf}, nil
}

// gptossDefaults is transformers' GptOssConfig with nothing set; its RoPE
// default (YaRN, factor 32 from 4096 tokens, truncate false) is applied by
// hfConfig.gptoss when config.json states no RoPE at all.
func gptossDefaults() hfConfig {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	return hfConfig{
		HiddenSize: 2880, IntermediateSize: 2880, NumHiddenLayers: 36, NumAttentionHeads: 64, NumKeyValueHeads: 8,
		HeadDim: 64, VocabSize: 201088, MaxPositionEmbeddings: 131072, RMSNormEps: f(1e-5), RopeTheta: f(150000),
		SlidingWindow: i(128), NumLocalExperts: i(128), NumExpertsPerTok: i(4), HiddenAct: "silu",
	}
}

// gptoss reads a GptOssForCausalLM config.json into what metaReader.gptoss
// makes of a GGUF file: experts intermediate_size wide weighted by a softmax
// over the top k, Q/K/V/O biases, a window on the layers layer_types says
// (by default the even ones) with the global RoPE base, and YaRN, its
// attention factor folded into the query scale. What the forward pass fixes
// (SwiGLU's limit 7 and gain 1.702, SiLU, the biases, full rotary) must be
// as it does.
func (hc *hfConfig) gptoss(cfg *Config, path string) error {
	fail := func(sentinel error, format string, args ...any) error {
		return fmt.Errorf("hf config %s: GptOssForCausalLM: %s: %w", path, fmt.Sprintf(format, args...), sentinel)
	}
	switch {
	case hc.HiddenAct != "silu":
		return fail(ErrUnsupported, "hidden_act %q (the experts' clamped SwiGLU is silu)", hc.HiddenAct)
	case hc.AttentionBias != nil && !*hc.AttentionBias:
		return fail(ErrUnsupported, "attention_bias false (the attention's biases are always read)")
	case hc.SwigluLimit != nil && *hc.SwigluLimit != gptossSwiGLULimit:
		return fail(ErrUnsupported, "swiglu_limit %g (the expert kernel clamps at %g)", *hc.SwigluLimit, gptossSwiGLULimit)
	case hc.SwigluAlpha != nil && *hc.SwigluAlpha != gptossSwiGLUAlpha:
		return fail(ErrUnsupported, "swiglu_alpha %g (the expert kernel's gain is %g)", *hc.SwigluAlpha, gptossSwiGLUAlpha)
	case hc.PartialRotaryFactor != nil && *hc.PartialRotaryFactor != 1:
		return fail(ErrUnsupported, "partial_rotary_factor %g (gpt-oss rotates whole heads)", *hc.PartialRotaryFactor)
	case hc.NumLocalExperts == nil || *hc.NumLocalExperts <= 0 || hc.NumExpertsPerTok == nil || *hc.NumExpertsPerTok <= 0:
		return fail(ErrMalformed, "num_local_experts and num_experts_per_tok must be positive")
	case hc.SlidingWindow == nil || *hc.SlidingWindow <= 0:
		return fail(ErrUnsupported, "sliding_window null or %v (the window layers need one)", hc.SlidingWindow)
	case hc.QuantizationConfig != nil && hc.QuantizationConfig.QuantMethod != "mxfp4":
		// Other methods' tensors (GPTQ's qweight, AWQ's, …) are not read.
		return fail(ErrUnsupported, "quantization_config.quant_method %q (want mxfp4, the release's, or none)", hc.QuantizationConfig.QuantMethod)
	}
	cfg.Experts, cfg.ExpertsUsed, cfg.ExpertFFN, cfg.ExpertNorm = *hc.NumLocalExperts, *hc.NumExpertsPerTok, cfg.FFN, true
	cfg.QKVBias = true
	cfg.Window, cfg.RopeThetaLocal = *hc.SlidingWindow, cfg.RopeTheta
	cfg.WindowLayers = make([]bool, max(cfg.Layers, 0))
	if hc.LayerTypes != nil {
		if len(hc.LayerTypes) != cfg.Layers {
			return fail(ErrMalformed, "%d layer_types for %d layers", len(hc.LayerTypes), cfg.Layers)
		}
		for i, t := range hc.LayerTypes {
			if t != "sliding_attention" && t != "full_attention" {
				return fail(ErrMalformed, "layer_types[%d] = %q (want sliding_attention or full_attention)", i, t)
			}
			cfg.WindowLayers[i] = t == "sliding_attention"
		}
	} else {
		setWindowPattern(cfg.WindowLayers, gptossWindowPattern)
	}
	cfg.QueryScale = float32(1 / math.Sqrt(float64(cfg.HeadDim)))
	s := hc.RopeScaling
	if s == nil && len(hc.RopeParameters) == 0 {
		f := func(v float64) *float64 { return &v }
		no := false
		s = &hfRopeScaling{RopeType: "yarn", Factor: 32, BetaFast: f(32), BetaSlow: f(1), Truncate: &no, OriginalMaxPositionEmbeddings: 4096}
	}
	if s == nil {
		return nil
	}
	switch typ := s.RopeType; cmp.Or(typ, s.Type) {
	case "default":
		return nil
	case "yarn":
	default:
		return fail(ErrUnsupported, "rope_scaling type %q (want yarn or default)", cmp.Or(typ, s.Type))
	}
	y := &RopeScaling{YaRN: true, Factor: float32(s.Factor), OriginalContext: s.OriginalMaxPositionEmbeddings, BetaFast: 32, BetaSlow: 1,
		YaRNUntruncated: s.Truncate != nil && !*s.Truncate}
	if y.OriginalContext <= 0 {
		return fail(ErrMissingKey, "YaRN without original_max_position_embeddings")
	}
	if s.Factor == 0 { // transformers: the context's growth
		y.Factor = float32(cfg.ContextLen) / float32(y.OriginalContext)
	}
	// transformers reads a beta of 0 as unset, as here.
	if s.BetaFast != nil && *s.BetaFast != 0 {
		y.BetaFast = float32(*s.BetaFast)
	}
	if s.BetaSlow != nil && *s.BetaSlow != 0 {
		y.BetaSlow = float32(*s.BetaSlow)
	}
	if !(y.Factor >= 1) || !(y.BetaFast > 0) || !(y.BetaSlow > 0) {
		return fail(ErrMalformed, "YaRN factor %g, betas %g/%g", y.Factor, y.BetaFast, y.BetaSlow)
	}
	attn := yarnMScale(y.Factor) // transformers' get_mscale(factor), as GGUF's path computes it
	switch {
	case s.AttentionFactor != nil:
		attn = float32(*s.AttentionFactor)
	case s.Mscale != nil && *s.Mscale != 0 && s.MscaleAllDim != nil && *s.MscaleAllDim != 0:
		m := func(k float64) float64 { return 0.1*k*math.Log(float64(y.Factor)) + 1 }
		if y.Factor > 1 {
			attn = float32(m(*s.Mscale) / m(*s.MscaleAllDim))
		}
	}
	if !(attn > 0) || math.IsInf(float64(attn), 0) {
		return fail(ErrMalformed, "YaRN attention factor %g", attn)
	}
	cfg.RopeScaling = y
	cfg.QueryScale *= attn * attn // q and k each carry it through cos and sin
	return nil
}
