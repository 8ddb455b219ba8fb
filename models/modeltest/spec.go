package modeltest

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
)

// Spec describes a tiny Llama-family model. The same Spec gives the same f32
// weights (Weights) whichever format they are written in.
type Spec struct {
	Layers  int
	Hidden  int
	Heads   int
	KVHeads int
	FFN     int
	Vocab   int // tokens; at least MinVocab. Extra ids beyond the trained merges are unused tokens.
	Seed    uint64

	Tied    bool // no output.weight: the head reuses token_embd
	QKVBias bool // a Qwen2 model: arch qwen2, Q/K/V biases, Q/K unpermuted in GGUF
	QKNorm  bool // a Qwen3 model: arch qwen3, per-head RMSNorm of Q and K before RoPE, no biases

	// Gemma makes a Gemma 3 model: QK-norm, post-norms, GeGLU, tied head,
	// (1 + w) norms (Weights holds w; GGUF files store 1 + w), and, with
	// Window > 0, every WindowPattern-th layer global and the others reading
	// the last Window positions.
	Gemma         bool
	Window        int
	WindowPattern int // 0: 6
	// Gemma2 (with Gemma) makes it a Gemma 2 model (GGUF, or by WriteHF a
	// Gemma2ForCausalLM checkpoint): no QK-norm, one RoPE base, every other
	// layer a window layer (the pattern is left to the reader's default of
	// 2, as Gemma 2 files do) and the soft-caps written as
	// attn_logit_softcapping and final_logit_softcapping.
	Gemma2       bool
	AttnSoftcap  float32 // 0: 50
	FinalSoftcap float32 // 0: 30

	// Phi3 makes a Phi-3 model (GGUF, or by WriteHF a Phi3ForCausalLM
	// checkpoint with qkv_proj and gate_up_proj): attn_qkv holding Q, K and V rows,
	// ffn_up holding the gate rows then the up rows, RoPE over the first
	// RopeDims elements of each head in NeoX pairs, LongRoPE factors when
	// LongRoPE is set, and with Window > 0 every layer a window layer.
	Phi3     bool
	RopeDims int       // 0: HeadDim
	LongRoPE *LongRoPE // nil: none

	// Experts > 0 makes the feed-forward a mixture of experts: arch
	// qwen3moe with QKNorm, qwen2moe with SharedExpertFFN, olmoe with
	// OLMoE, else llama with experts (Mixtral); WriteHF writes one tensor
	// per expert (hfmoe.go).
	Experts     int
	ExpertsUsed int // top k
	ExpertFFN   int // 0: FFN
	// SharedExpertFFN > 0 adds Qwen2-MoE's shared expert of that width and
	// its sigmoid gate (ffn_*_shexp, ffn_gate_inp_shexp); set QKVBias too for
	// a Qwen2-MoE as released.
	SharedExpertFFN int
	// OLMoE makes an OLMoE model: QK-norm over the whole Q and K projections
	// (attn_q_norm of Heads·HeadDim, attn_k_norm of KVHeads·HeadDim), no
	// biases, experts FFN wide (llama.cpp reads their width from
	// feed_forward_length, and takes attn_k_norm as wide as the embedding:
	// for llama.cpp, KVHeads = Heads).
	OLMoE bool

	// SmolLM3 makes a SmolLM3 model (GGUF arch smollm3): the Llama tensors,
	// Q and K permuted as for llama, and no RoPE on every fourth layer
	// (llama.cpp's fixed interval; nothing in the file says so).
	SmolLM3 bool

	// Gemma4 makes a Gemma 4 model (GGUF arch gemma4; gemma4.go writes its
	// tensors): QK-norm, post-norms, GeGLU, tied head, plain norm weights,
	// every WindowPattern-th layer global (Window > 0 is required), the
	// others window layers with heads of HeadDim (Hidden/Heads) and KVHeads;
	// the global layers' heads are HeadDimFull wide with KVHeadsFull KV heads.
	Gemma4 bool
	// HeadDimFull and KVHeadsFull are Gemma 4's global layers' head size
	// and KV heads (0: those of the window layers).
	HeadDimFull, KVHeadsFull int
	// KEqV: Gemma 4's global layers have no attn_v; V is K's projection.
	KEqV bool
	// PartialRotaryFull in (0, 1): Gemma 4's "proportional" RoPE on the
	// global layers, as rope_freqs.weight (divisor 1 for that share of the
	// pairs, 1e30 for the rest); 0: every pair rotates (divisors of 1).
	PartialRotaryFull float32
	// LayerScale adds Gemma 4's layer_output_scale.weight to every layer.
	LayerScale bool
	// Gemma 4 E2B/E4B: PerLayerEmbd > 0 adds per-layer inputs that wide;
	// the last SharedKVLayers layers reuse earlier layers' K/V (their
	// attn_k/attn_v are still written, as checkpoints carry them); with
	// DoubleWideMLP those layers' feed-forward is 2·FFN wide.
	PerLayerEmbd, SharedKVLayers int
	DoubleWideMLP                bool
	// Experts > 0 on a Gemma 4 spec makes every layer the 26B-A4B's: the
	// dense FFN beside a mixture with its router scale, per-expert output
	// scales and branch norms (gemma4.go); FusedGateUpExps writes the
	// experts' gate and up as one ffn_gate_up_exps (gate rows first), as
	// convert_hf_to_gguf does from the checkpoint's gate_up_proj.
	FusedGateUpExps bool

	// GPTOSS makes a gpt-oss model (GGUF arch gpt-oss; gptoss.go writes its
	// tensors): Experts required, a window on the even layers (Window > 0),
	// attention biases and sinks, expert biases, YaRN when YaRN is set; with
	// ExpertsMXFP4 the expert matrices are MXFP4 whatever the file's type.
	GPTOSS       bool
	ExpertsMXFP4 bool
	YaRN         *YaRN
	// Harmony (GGUF only) ends the vocabulary with gpt-oss's harmony
	// tokens, control tokens as its files have them, <|return|> the EOS,
	// and makes the chat template a harmony one (gptoss.go).
	Harmony bool

	RopeTheta   float32      // 0: 10000
	RMSEps      float32      // 0: 1e-5
	ContextLen  int          // 0: 256
	RopeScaling *RopeScaling // nil: none (Llama 3 style otherwise)

	HFShards int // WriteHF: split the weights over this many safetensors files (0 or 1: one file)
}

// RopeScaling is Llama 3's frequency-dependent RoPE scaling.
type RopeScaling struct {
	Factor          float32
	LowFreqFactor   float32
	HighFreqFactor  float32
	OriginalContext int
}

// YaRN is gpt-oss's RoPE scaling as GGUF states it.
type YaRN struct {
	Factor          float32
	OriginalContext int
}

// LongRoPE is Phi-3's LongRoPE (SU) scaling: rope_factors_long.weight and
// rope_factors_short.weight (drawn from the Spec's seed, each in [1, 4)),
// the context the short ones serve, and the attention factor the converter
// derives from ContextLen / OriginalContext.
type LongRoPE struct {
	OriginalContext int
}

// AttnFactor is what convert_hf_to_gguf.py writes as rope.scaling.attn_factor
// for a LongRoPE model of contextLen tokens.
func (l LongRoPE) AttnFactor(contextLen int) float32 {
	scale := float64(contextLen) / float64(l.OriginalContext)
	if scale <= 1 {
		return 1
	}
	return float32(math.Sqrt(1 + math.Log(scale)/math.Log(float64(l.OriginalContext))))
}

// Arch is the GGUF architecture name the Spec is written as.
func (s Spec) Arch() string {
	if s.GPTOSS {
		return "gpt-oss"
	}
	if s.Gemma4 {
		return "gemma4"
	}
	if s.SmolLM3 {
		return "smollm3"
	}
	if s.Phi3 {
		return "phi3"
	}
	if s.Gemma && s.Gemma2 {
		return "gemma2"
	}
	if s.Gemma {
		return "gemma3"
	}
	if s.OLMoE {
		return "olmoe"
	}
	if s.Experts > 0 && s.SharedExpertFFN > 0 {
		return "qwen2moe"
	}
	if s.QKNorm && s.Experts > 0 {
		return "qwen3moe"
	}
	if s.QKNorm {
		return "qwen3"
	}
	if s.QKVBias {
		return "qwen2"
	}
	return "llama"
}

// HeadDim is Hidden / Heads.
func (s Spec) HeadDim() int { return s.Hidden / s.Heads }

func (s Spec) withDefaults() Spec {
	if s.RopeTheta == 0 {
		s.RopeTheta = 10000
	}
	if s.RMSEps == 0 {
		s.RMSEps = 1e-5
	}
	if s.ContextLen == 0 {
		s.ContextLen = 256
	}
	if s.KVHeads == 0 {
		s.KVHeads = s.Heads
	}
	if s.Gemma {
		s.Tied, s.QKNorm = true, !s.Gemma2
		if s.WindowPattern == 0 {
			s.WindowPattern = 6
		}
	}
	if s.Gemma4 {
		s.Tied = true
		if s.WindowPattern == 0 {
			s.WindowPattern = 6
		}
		if s.HeadDimFull == 0 {
			s.HeadDimFull = s.HeadDim()
		}
		if s.KVHeadsFull == 0 {
			s.KVHeadsFull = s.KVHeads
		}
	}
	if s.Gemma2 {
		s.WindowPattern = 2
		if s.AttnSoftcap == 0 {
			s.AttnSoftcap = 50
		}
		if s.FinalSoftcap == 0 {
			s.FinalSoftcap = 30
		}
	}
	if s.Experts > 0 && s.ExpertFFN == 0 {
		s.ExpertFFN = s.FFN
	}
	if s.RopeDims == 0 && s.Heads > 0 {
		s.RopeDims = s.HeadDim()
	}
	return s
}

func (s Spec) validate() error {
	switch {
	case s.Layers <= 0 || s.Hidden <= 0 || s.Heads <= 0 || s.FFN <= 0:
		return fmt.Errorf("modeltest: spec %+v has a zero dimension", s)
	case s.Hidden%s.Heads != 0 || s.Heads%s.KVHeads != 0 || s.HeadDim()%2 != 0:
		return fmt.Errorf("modeltest: %d heads (%d KV) do not divide hidden %d into even head sizes", s.Heads, s.KVHeads, s.Hidden)
	case s.Experts < 0 || s.Experts > 0 && (s.ExpertsUsed <= 0 || s.ExpertsUsed > s.Experts):
		return fmt.Errorf("modeltest: %d experts, %d used", s.Experts, s.ExpertsUsed)
	case s.OLMoE && (s.Experts == 0 || s.ExpertFFN != s.FFN || s.QKNorm || s.QKVBias || s.Gemma || s.Phi3 || s.SharedExpertFFN > 0):
		return fmt.Errorf("modeltest: an OLMoE spec has experts FFN wide and no QK-norm, bias, Gemma, Phi-3 or shared-expert options")
	case s.SharedExpertFFN < 0 || s.SharedExpertFFN > 0 && (s.Experts == 0 || s.QKNorm || s.Gemma):
		return fmt.Errorf("modeltest: a shared expert (Qwen2-MoE) needs experts and no QK-norm or Gemma options")
	case s.Phi3 && (s.Gemma || s.QKNorm || s.QKVBias || s.Experts > 0):
		return fmt.Errorf("modeltest: a Phi-3 spec has no Gemma, QK-norm, bias or expert options")
	case s.RopeDims%2 != 0 || s.RopeDims > s.HeadDim() || s.RopeDims != s.HeadDim() && !s.Phi3:
		return fmt.Errorf("modeltest: %d rotary dims for head size %d (partial rotary is Phi-3's)", s.RopeDims, s.HeadDim())
	case s.LongRoPE != nil && (!s.Phi3 || s.LongRoPE.OriginalContext <= 1):
		return fmt.Errorf("modeltest: LongRoPE %+v needs a Phi-3 spec and an original context above 1", *s.LongRoPE)
	case s.Gemma2 && (!s.Gemma || s.Window <= 0 || s.AttnSoftcap <= 0 || s.FinalSoftcap <= 0):
		return fmt.Errorf("modeltest: a Gemma 2 spec sets Gemma too, a window and positive soft-caps")
	case s.SmolLM3 && (s.Gemma || s.Phi3 || s.QKNorm || s.QKVBias || s.Experts > 0):
		return fmt.Errorf("modeltest: a SmolLM3 spec has no Gemma, Phi-3, QK-norm, bias or expert options")
	case s.GPTOSS && (s.Experts == 0 || s.Window <= 0 || s.Gemma || s.Gemma4 || s.Phi3 || s.SmolLM3 || s.QKNorm || s.Tied || s.SharedExpertFFN > 0):
		return fmt.Errorf("modeltest: a gpt-oss spec has experts, a window, an untied head and no other family's options")
	case s.Gemma4 && (s.Gemma || s.Phi3 || s.SmolLM3 || s.QKNorm || s.QKVBias || s.OLMoE || s.SharedExpertFFN > 0 || s.Window <= 0):
		return fmt.Errorf("modeltest: a Gemma 4 spec has a window and no Gemma (3), Phi-3, SmolLM3, QK-norm, bias, OLMoE or shared-expert options")
	case s.FusedGateUpExps && (!s.Gemma4 || s.Experts == 0):
		return fmt.Errorf("modeltest: FusedGateUpExps is Gemma 4 experts' layout")
	case s.Gemma4 && (s.PerLayerEmbd < 0 || s.SharedKVLayers < 0 || s.SharedKVLayers > 0 && s.SharedKVLayers+2 > s.Layers):
		return fmt.Errorf("modeltest: Gemma 4 per-layer inputs %d, %d shared-K/V layers of %d", s.PerLayerEmbd, s.SharedKVLayers, s.Layers)
	case s.Gemma4 && (s.HeadDimFull%2 != 0 || s.Heads%s.KVHeadsFull != 0 || s.PartialRotaryFull < 0 || s.PartialRotaryFull >= 1):
		return fmt.Errorf("modeltest: Gemma 4 global heads %d wide, %d KV heads, partial rotary %g", s.HeadDimFull, s.KVHeadsFull, s.PartialRotaryFull)
	case s.Vocab < MinVocab:
		return fmt.Errorf("modeltest: vocab %d is below the minimum %d (specials + 256 bytes)", s.Vocab, MinVocab)
	case s.Harmony && s.Vocab < MinVocab+len(HarmonyTokens):
		return fmt.Errorf("modeltest: a harmony vocabulary of %d leaves no room for its %d tokens", s.Vocab, len(HarmonyTokens))
	}
	return nil
}

// tensorShape is one tensor of a Spec, in the order the writers emit them.
type tensorShape struct {
	name  string
	shape []int
}

func tensorList(spec Spec) []tensorShape {
	s := spec.withDefaults()
	hd := s.HeadDim()
	out := []tensorShape{{"token_embd.weight", []int{s.Vocab, s.Hidden}}}
	add := func(name string, shape ...int) { out = append(out, tensorShape{name, shape}) }
	if s.Phi3 {
		return phi3TensorList(s, out)
	}
	if s.Gemma4 {
		return gemma4TensorList(s, out)
	}
	if s.GPTOSS {
		return gptossTensorList(s, out)
	}
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", s.Hidden)
		add(p+"attn_q.weight", s.Heads*hd, s.Hidden)
		add(p+"attn_k.weight", s.KVHeads*hd, s.Hidden)
		add(p+"attn_v.weight", s.KVHeads*hd, s.Hidden)
		if s.QKVBias {
			add(p+"attn_q.bias", s.Heads*hd)
			add(p+"attn_k.bias", s.KVHeads*hd)
			add(p+"attn_v.bias", s.KVHeads*hd)
		}
		if s.QKNorm {
			add(p+"attn_q_norm.weight", hd)
			add(p+"attn_k_norm.weight", hd)
		}
		if s.OLMoE {
			add(p+"attn_q_norm.weight", s.Heads*hd)
			add(p+"attn_k_norm.weight", s.KVHeads*hd)
		}
		add(p+"attn_output.weight", s.Hidden, s.Heads*hd)
		if s.Gemma {
			add(p+"post_attention_norm.weight", s.Hidden)
		}
		add(p+"ffn_norm.weight", s.Hidden)
		if s.Experts > 0 {
			add(p+"ffn_gate_inp.weight", s.Experts, s.Hidden)
			add(p+"ffn_gate_exps.weight", s.Experts, s.ExpertFFN, s.Hidden)
			add(p+"ffn_up_exps.weight", s.Experts, s.ExpertFFN, s.Hidden)
			add(p+"ffn_down_exps.weight", s.Experts, s.Hidden, s.ExpertFFN)
			if f := s.SharedExpertFFN; f > 0 {
				add(p+"ffn_gate_inp_shexp.weight", s.Hidden)
				add(p+"ffn_gate_shexp.weight", f, s.Hidden)
				add(p+"ffn_up_shexp.weight", f, s.Hidden)
				add(p+"ffn_down_shexp.weight", s.Hidden, f)
			}
			continue
		}
		add(p+"ffn_gate.weight", s.FFN, s.Hidden)
		add(p+"ffn_up.weight", s.FFN, s.Hidden)
		add(p+"ffn_down.weight", s.Hidden, s.FFN)
		if s.Gemma {
			add(p+"post_ffw_norm.weight", s.Hidden)
		}
	}
	add("output_norm.weight", s.Hidden)
	if !s.Tied {
		add("output.weight", s.Vocab, s.Hidden)
	}
	return out
}

// Shapes gives every tensor's row-major shape, keyed by GGUF name.
func Shapes(spec Spec) map[string][]int {
	out := map[string][]int{}
	for _, t := range tensorList(spec) {
		out[t.name] = t.shape
	}
	return out
}

// Weights gives the model's f32 weights keyed by GGUF name, in the Hugging Face
// (unpermuted) layout: the reference a forward pass in F32 can use directly.
// Each tensor is drawn from its own stream seeded by (Seed, name), so adding a
// tensor never changes another.
func Weights(spec Spec) map[string][]float32 {
	out := map[string][]float32{}
	for name, shape := range Shapes(spec) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		h := fnv.New64a()
		h.Write([]byte(name))
		rng := rand.New(rand.NewPCG(spec.Seed, h.Sum64()))
		w := make([]float32, n)
		switch {
		case len(shape) == 1 && strings.HasPrefix(name, "rope_factors_"):
			// LongRoPE divides each pair's frequency by its factor.
			for i := range w {
				w[i] = float32(1 + 3*rng.Float64())
			}
		case name == "rope_freqs.weight":
			// Gemma 4's proportional RoPE: the rotated pairs, then the still ones.
			rot := len(w)
			if spec.PartialRotaryFull > 0 {
				rot = int(float64(spec.PartialRotaryFull) * float64(len(w)))
			}
			for i := range w {
				w[i] = 1
				if i >= rot {
					w[i] = 1e30
				}
			}
		case name == "per_layer_token_embd.weight":
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
		case strings.HasSuffix(name, "attn_sinks.weight"):
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
		case strings.HasSuffix(name, "ffn_gate_inp.scale"):
			// Gemma 4's router input is rmsnorm(x)/√hidden times this: gains
			// near 16 make the tiny models' router logits ~2 apart, so top-k
			// picks are rarely near-ties that rounding could flip.
			for i := range w {
				w[i] = float32(16 * (1 + 0.25*rng.NormFloat64()))
			}
		case strings.HasSuffix(name, "ffn_down_exps.scale"):
			for i := range w {
				w[i] = float32(0.5 + rng.Float64())
			}
		case strings.HasSuffix(name, "layer_output_scale.weight"):
			for i := range w {
				w[i] = float32(0.5 + 0.5*rng.Float64())
			}
		case len(shape) == 1 && isNorm(name) && spec.Gemma:
			// Gemma scales by 1 + w: w near 0 is a gain near 1.
			for i := range w {
				w[i] = float32(0.1 * rng.NormFloat64())
			}
		case len(shape) == 1 && isNorm(name):
			// Norm gains near 1 keep activations at a sane scale through the layers.
			for i := range w {
				w[i] = float32(1 + 0.1*rng.NormFloat64())
			}
		case len(shape) == 1:
			for i := range w {
				w[i] = float32(0.1 * rng.NormFloat64())
			}
		default:
			// N(0, 1/in): outputs keep the variance of their inputs.
			std := 1 / math.Sqrt(float64(shape[len(shape)-1]))
			if name == "token_embd.weight" {
				std = 1
			}
			for i := range w {
				w[i] = float32(std * rng.NormFloat64())
			}
		}
		out[name] = w
	}
	return out
}

// phi3TensorList is tensorList for a Phi-3 spec: the fused tensors in the
// Llama ones' place.
func phi3TensorList(s Spec, out []tensorShape) []tensorShape {
	hd := s.HeadDim()
	add := func(name string, shape ...int) { out = append(out, tensorShape{name, shape}) }
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", s.Hidden)
		add(p+"attn_qkv.weight", (s.Heads+2*s.KVHeads)*hd, s.Hidden)
		add(p+"attn_output.weight", s.Hidden, s.Heads*hd)
		add(p+"ffn_norm.weight", s.Hidden)
		add(p+"ffn_up.weight", 2*s.FFN, s.Hidden)
		add(p+"ffn_down.weight", s.Hidden, s.FFN)
	}
	add("output_norm.weight", s.Hidden)
	if !s.Tied {
		add("output.weight", s.Vocab, s.Hidden)
	}
	if s.LongRoPE != nil {
		add("rope_factors_long.weight", s.RopeDims/2)
		add("rope_factors_short.weight", s.RopeDims/2)
	}
	return out
}

func isNorm(name string) bool {
	n := len(name)
	return n >= len("norm.weight") && name[n-len("norm.weight"):] == "norm.weight"
}

// PermuteQK reorders the rows of a Q or K projection (or bias) as llama.cpp's
// convert_hf_to_gguf.py `permute` does, so interleaved RoPE (pairs 2i, 2i+1)
// on the result equals halves RoPE (pairs i, i+d/2) on the original:
//
//	per head: rows [x0..x(d/2-1) | y0..y(d/2-1)] → [x0 y0 x1 y1 ...]
//
// w holds heads*headDim rows of cols values each.
func PermuteQK(w []float32, heads, headDim, cols int) []float32 {
	out := make([]float32, len(w))
	half := headDim / 2
	for h := range heads {
		for j := range half {
			for t := range 2 {
				src := (h*headDim + t*half + j) * cols
				dst := (h*headDim + 2*j + t) * cols
				copy(out[dst:dst+cols], w[src:src+cols])
			}
		}
	}
	return out
}

// RopeFactors are the per-pair frequency divisors llama.cpp stores as
// rope_freqs.weight for Llama 3 scaling (convert_hf_to_gguf.py,
// LlamaModel.generate_extra_tensors).
func RopeFactors(theta float32, headDim int, rs RopeScaling) []float32 {
	lowWavelen := float64(rs.OriginalContext) / float64(rs.LowFreqFactor)
	highWavelen := float64(rs.OriginalContext) / float64(rs.HighFreqFactor)
	out := make([]float32, headDim/2)
	for i := range out {
		freq := 1 / math.Pow(float64(theta), float64(2*i)/float64(headDim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			out[i] = 1
		case wavelen > lowWavelen:
			out[i] = rs.Factor
		default:
			smooth := (float64(rs.OriginalContext)/wavelen - float64(rs.LowFreqFactor)) /
				float64(rs.HighFreqFactor-rs.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/float64(rs.Factor) + smooth))
		}
	}
	return out
}
