package models

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernels"
)

// kvElemBytes is the size of one cached K or V value: both backends keep F16.
const kvElemBytes = 2

// KVBytesPerToken is what one token costs in the KV cache when every layer
// keeps it: K and V for each layer's KV heads.
func (c Config) KVBytesPerToken() int64 {
	var cols int
	for i := range c.Layers {
		cols += c.layerKVCols(i)
	}
	return int64(2 * cols * kvElemBytes)
}

// KVBytes is the KV memory a sequence of n tokens needs in blocks of
// blockSize tokens: with windowed, a window layer keeps only the blocks that
// hold its last Window positions (the block the window starts in included),
// as a cache that frees blocks outside the window would; without, every
// layer keeps all n.
func (c Config) KVBytes(n, blockSize int, windowed bool) int64 {
	blocks := func(tokens int) int64 { return int64((tokens + blockSize - 1) / blockSize) }
	var total int64
	for i := range c.Layers {
		b := blocks(n)
		if windowed && c.IsWindowLayer(i) && n > c.Window {
			// Positions (n−Window, n] span at most this many blocks.
			b = min(b, blocks(c.Window-1)+1)
		}
		total += b * int64(2*c.layerKVCols(i)*kvElemBytes) * int64(blockSize)
	}
	return total
}

// TypeShare is one tensor type's part of a model's weights.
type TypeShare struct {
	DType   kernels.DType
	Tensors int
	Params  int64
	Bytes   int64
}

// WeightMix sums tensors by type, in order of first appearance, and returns
// the parameter count over all of them.
func WeightMix(tensors []TensorInfo) (mix []TypeShare, params int64) {
	for _, t := range tensors {
		n := int64(1)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		params += n
		i := slices.IndexFunc(mix, func(s TypeShare) bool { return s.DType == t.DType })
		if i < 0 {
			mix = append(mix, TypeShare{DType: t.DType})
			i = len(mix) - 1
		}
		mix[i].Tensors++
		mix[i].Params += n
		mix[i].Bytes += int64(t.Size)
	}
	return mix, params
}

// Fact is one line of a model's description: what sluice inspect prints.
type Fact struct{ Key, Value string }

// Describe lists what c configures beyond the shapes: RoPE (with Phi-3's
// partial rotary and LongRoPE), the experts, QK-norm, the attention layout,
// the query scale and Gemma 2's soft-caps, as the loader applies them. src
// answers which frequency-factor tensors the file holds (rope_freqs, LongRoPE's);
// nil leaves them out.
func Describe(c Config, src WeightSource) []Fact {
	var out []Fact
	add := func(k, format string, a ...any) { out = append(out, Fact{k, fmt.Sprintf(format, a...)}) }
	scaling := describeScaling(c.RopeScaling)
	if src != nil && src.Has("rope_freqs.weight") {
		// The loader divides by these instead of applying any metadata scaling.
		scaling = "each pair's frequency divided by rope_freqs.weight (Llama 3's scaling as GGUF stores it)"
		if c.Arch == "gemma4" {
			scaling = "global layers: each pair's frequency divided by rope_freqs.weight (Gemma 4's proportional RoPE: pairs divided by 1e30 stay still); window layers: none"
		}
	}
	add("rope", "theta %g, style %v, %s", c.RopeTheta, c.RopeStyle, scaling)
	if c.RopeDims > 0 && c.RopeDims < c.HeadDim {
		add("rotary", "partial: the first %d of %d head elements rotate, the other %d pass through", c.RopeDims, c.HeadDim, c.HeadDim-c.RopeDims)
	}
	if src != nil && (src.Has("rope_factors_long.weight") || src.Has("rope_factors_short.weight")) {
		add("longrope", "%s; attention factor %g", longRoPEFactors(c), orDefault(c.RopeAttnFactor, 1))
	}
	if c.Experts > 0 {
		add("experts", "%d per layer, %d per token (expert ffn %d, top-k weights renormalised: %v)",
			c.Experts, c.ExpertsUsed, c.ExpertFFN, c.ExpertNorm)
		if c.SharedExpertFFN > 0 {
			add("shared expert", "ffn %d, sigmoid-gated per token", c.SharedExpertFFN)
		}
		if layout := expertLayout(src); layout != "" {
			add("expert layout", "%s", layout)
		}
	}
	if len(c.NoRope) > 0 {
		add("nope layers", "%s (no RoPE: they attend by content alone)", layerList(c.NoRope))
	}
	add("qk norm", "%v (over whole projections: %v)", c.QKNorm, c.QKNormWhole)
	add("attention", "%s", WindowLayout(c))
	if c.windowHeadsDiffer() {
		add("window heads", "head size %d, %d KV heads (global layers: %d, %d KV heads); the two kinds keep separate KV stores",
			c.windowHeadDim(), c.windowKVHeads(), c.HeadDim, c.KVHeads)
	}
	if c.KVSharedFrom > 0 {
		add("shared kv", "layers %d–%d compute no K/V: window layers read layer %d's, global ones layer %d's",
			c.KVSharedFrom, c.Layers-1, c.KVSharedFrom-2, c.KVSharedFrom-1)
	}
	if c.PerLayerEmbd > 0 {
		add("per-layer inputs", "%d wide for each of %d layers (a token embedding slice and a projection of the input, added after each feed-forward)", c.PerLayerEmbd, c.Layers)
	}
	if len(c.LayerFFN) > 0 {
		add("ffn per layer", "%s", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(c.LayerFFN)), ","), "[]"))
	}
	if c.Arch == "gpt-oss" {
		add("attention sinks", "a learned logit per head joins each softmax (no value); Q, K, V and output biased")
		add("expert ffn", "router and experts biased; weights a softmax over the top %d logits; SwiGLU clamped at ±%g, σ(%g·x)", c.ExpertsUsed, gptossSwiGLULimit, gptossSwiGLUAlpha)
	}
	if c.Arch == "gemma4" {
		add("v norm", "each V head RMS-normed without a weight; a global layer without attn_v takes K's projection as V")
		if c.Experts > 0 {
			add("expert ffn", "%s", gemma4MoELayout(c, src))
		}
	}
	if r := c.Reasoning(); r != ReasoningNone {
		add("reasoning", "%s", r)
	}
	if c.QueryScale != 0 {
		// Gemma's query_pre_attn_scalar and Phi-3's folded attention factor
		// both move it off the head size's; say by how much.
		if r := float64(c.QueryScale) * math.Sqrt(float64(c.HeadDim)); math.Abs(r-1) < 1e-6 {
			add("query scale", "%.6g (1/√%d, the head size)", c.QueryScale, c.HeadDim)
		} else {
			add("query scale", "%.6g (%.6g × the head size's 1/√%d)", c.QueryScale, r, c.HeadDim)
		}
	}
	if c.AttnSoftcap > 0 || c.FinalSoftcap > 0 {
		add("soft-caps", "attention scores %s, final logits %s (s → cap·tanh(s/cap))", capOrNone(c.AttnSoftcap), capOrNone(c.FinalSoftcap))
	}
	return out
}

// layerList names the layers marked in on, comma-separated.
func layerList(on []bool) string {
	var out []string
	for i, b := range on {
		if b {
			out = append(out, strconv.Itoa(i))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return "layers " + strings.Join(out, ",")
}

func orDefault(v, def float32) float32 {
	if v == 0 {
		return def
	}
	return v
}

func capOrNone(v float32) string {
	if v > 0 {
		return strconv.FormatFloat(float64(v), 'g', -1, 32)
	}
	return "none"
}

func describeScaling(s *RopeScaling) string {
	switch {
	case s == nil:
		return "no scaling"
	case s.Linear:
		return fmt.Sprintf("linear scaling ×%g", s.Factor)
	case s.YaRN:
		return fmt.Sprintf("YaRN ×%g from %d tokens (betas %g/%g; cos/sin ×%.6g, folded into the query scale)",
			s.Factor, s.OriginalContext, s.BetaFast, s.BetaSlow, yarnMScale(s.Factor))
	}
	return fmt.Sprintf("llama3 scaling ×%g from %d tokens (low-frequency factor %g, high %g)",
		s.Factor, s.OriginalContext, s.LowFreqFactor, s.HighFreqFactor)
}

// longRoPEFactors says which factor set the loader divides the frequencies by
// (phi3Frequencies): it follows the context the model is loaded with, so a
// server given a shorter --context may take the other set.
func longRoPEFactors(c Config) string {
	if c.ContextLen > c.RopeOrigContext {
		return fmt.Sprintf("long factors active (context %d > original %d; a --context of %d or less takes the short ones)",
			c.ContextLen, c.RopeOrigContext, c.RopeOrigContext)
	}
	return fmt.Sprintf("short factors active (context %d ≤ original %d)", c.ContextLen, c.RopeOrigContext)
}

// WindowLayout describes which layers attend globally and which over a
// sliding window: "global" for the Llama family, else the window size, the
// window layers' RoPE base and the global layers' indices.
func WindowLayout(c Config) string {
	if c.Window <= 0 {
		return "global (every layer reads the whole context)"
	}
	var global []string
	for i := range c.Layers {
		if !c.IsWindowLayer(i) {
			global = append(global, strconv.Itoa(i))
		}
	}
	where := "no global layers"
	if len(global) > 0 {
		where = "global on layers " + strings.Join(global, ",")
		if c.RopeThetaLocal != c.RopeTheta {
			where += fmt.Sprintf(" (RoPE base %g)", c.RopeTheta)
		}
	}
	return fmt.Sprintf("sliding window of %d tokens on %d of %d layers (RoPE base %g); %s",
		c.Window, c.Layers-len(global), c.Layers, c.RopeThetaLocal, where)
}
