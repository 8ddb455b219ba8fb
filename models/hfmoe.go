package models

import (
	"cmp"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/kernels"
)

// Mixtures of experts from Hugging Face checkpoints. config.json names the
// mixture's shape; the checkpoint keeps one tensor per expert,
//
//	Mixtral:                  model.layers.N.block_sparse_moe.experts.E.{w1,w3,w2}.weight  (gate, up, down)
//	Qwen2/3-MoE, OLMoE:       model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight
//
// where the MoE kernels read GGUF's stacked ffn_{gate,up,down}_exps
// ([experts, ffn, hidden] and [experts, hidden, ffn]). HFDir stacks them
// when the loader asks for the stacked name: one buffer per stacked tensor,
// filled from the mapped experts, not kept by HFDir (the backend holds it, or
// copies it and lets it go), and the experts' mapped pages released as they
// are copied, so a layer's experts are not resident twice.

// hfMoE is what each mixture architecture's config.json means.
type hfMoE struct {
	expertsKey string // num_local_experts (Mixtral) or num_experts
	// moeWidth: the experts are moe_intermediate_size wide (Qwen), else
	// intermediate_size (Mixtral, OLMoE: their layers have no dense FFN).
	moeWidth bool
	// alwaysNorm: Mixtral always renormalises the top k; the others do
	// when norm_topk_prob says (transformers' default false).
	alwaysNorm bool
	eps, theta float64 // transformers' defaults when config.json omits them
}

var hfMoEArchs = map[string]hfMoE{
	"MixtralForCausalLM":  {expertsKey: "num_local_experts", alwaysNorm: true, eps: 1e-5, theta: 1e6},
	"Qwen2MoeForCausalLM": {expertsKey: "num_experts", moeWidth: true, eps: 1e-6, theta: 10000},
	"Qwen3MoeForCausalLM": {expertsKey: "num_experts", moeWidth: true, eps: 1e-6, theta: 10000},
	"OlmoeForCausalLM":    {expertsKey: "num_experts", eps: 1e-5, theta: 10000},
}

func isHFMoE(arch string) bool { _, ok := hfMoEArchs[arch]; return ok }

// moe reads a mixture's config.json keys into cfg, refusing what the
// forward pass cannot run: dense layers among the mixture layers
// (decoder_sparse_step > 1, mlp_only_layers), OLMoE's clip_qkv, Qwen's
// use_sliding_window, an activation other than SiLU.
func (hc *hfConfig) moe(cfg *Config, path string) error {
	arch := hc.Architectures[0]
	a := hfMoEArchs[arch]
	fail := func(sentinel error, format string, args ...any) error {
		return fmt.Errorf("hf config %s: %s: %s: %w", path, arch, fmt.Sprintf(format, args...), sentinel)
	}
	if hc.RMSNormEps == nil {
		cfg.RMSEps = float32(a.eps)
	}
	if hc.RopeTheta == nil {
		cfg.RopeTheta = float32(a.theta)
	}
	if hc.HiddenAct != "" && hc.HiddenAct != "silu" {
		return fail(ErrUnsupported, "hidden_act %q (the experts are SwiGLU: silu)", hc.HiddenAct)
	}
	experts := hc.NumExperts
	if a.expertsKey == "num_local_experts" {
		experts = hc.NumLocalExperts
	}
	switch {
	case experts == nil:
		return fail(ErrMissingKey, "%s", a.expertsKey)
	case hc.NumExpertsPerTok == nil:
		return fail(ErrMissingKey, "num_experts_per_tok")
	case a.moeWidth && hc.MoEIntermediateSize == nil:
		return fail(ErrMissingKey, "moe_intermediate_size")
	}
	cfg.Experts, cfg.ExpertsUsed, cfg.ExpertFFN = *experts, *hc.NumExpertsPerTok, cfg.FFN
	if a.moeWidth {
		cfg.ExpertFFN = *hc.MoEIntermediateSize
	}
	if cfg.Experts <= 0 {
		// Qwen's num_experts = 0 makes every layer dense: not a mixture.
		return fail(ErrUnsupported, "%s = %d (a model without experts is its dense architecture)", a.expertsKey, cfg.Experts)
	}
	cfg.ExpertNorm = a.alwaysNorm || hc.NormTopkProb != nil && *hc.NormTopkProb
	if s := hc.DecoderSparseStep; s != nil && *s != 1 {
		if *s <= 0 {
			return fail(ErrMalformed, "decoder_sparse_step = %d (layer i is a mixture when (i+1) %% step == 0)", *s)
		}
		return fail(ErrUnsupported, "decoder_sparse_step = %d puts dense layers between the mixture layers; every layer must be a mixture", *s)
	}
	if len(hc.MLPOnlyLayers) > 0 {
		return fail(ErrUnsupported, "mlp_only_layers %v are dense layers among the mixture layers; every layer must be a mixture", hc.MLPOnlyLayers)
	}
	if hc.ClipQKV != nil {
		return fail(ErrUnsupported, "clip_qkv = %g (Q, K and V clamped after the projections) is not implemented", *hc.ClipQKV)
	}
	if hc.UseSlidingWindow != nil && *hc.UseSlidingWindow {
		return fail(ErrUnsupported, "use_sliding_window (a window on the layers from max_window_layers up) is not implemented")
	}
	switch arch {
	case "Qwen2MoeForCausalLM":
		// Qwen2MoeSparseMoeBlock always has its shared expert.
		if hc.SharedExpertIntermediateSize == nil {
			return fail(ErrMissingKey, "shared_expert_intermediate_size")
		}
		if cfg.SharedExpertFFN = *hc.SharedExpertIntermediateSize; cfg.SharedExpertFFN <= 0 {
			return fail(ErrMalformed, "shared_expert_intermediate_size = %d must be positive", cfg.SharedExpertFFN)
		}
	case "Qwen3MoeForCausalLM":
		cfg.QKNorm = true // per head, always: a checkpoint without q_norm fails to load
	case "OlmoeForCausalLM":
		cfg.QKNorm, cfg.QKNormWhole = true, true // over the whole Q (hidden_size) and K projections
	}
	return nil
}

// hfExpertTensor matches one expert's projection.
var hfExpertTensor = regexp.MustCompile(`^model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(w1|w2|w3|gate_proj|up_proj|down_proj)\.weight$`)

var hfExpertParts = map[string]string{
	"w1": "ffn_gate_exps.weight", "w3": "ffn_up_exps.weight", "w2": "ffn_down_exps.weight",
	"gate_proj": "ffn_gate_exps.weight", "up_proj": "ffn_up_exps.weight", "down_proj": "ffn_down_exps.weight",
}

// hfExpertName says which stacked GGUF tensor an expert's projection belongs
// to, and at which index.
func hfExpertName(name string) (stacked string, expert int, ok bool) {
	m := hfExpertTensor.FindStringSubmatch(name)
	if m == nil {
		return "", 0, false
	}
	e, err := strconv.Atoi(m[2])
	if err != nil {
		return "", 0, false
	}
	return "blk." + m[1] + "." + hfExpertParts[m[3]], e, true
}

// addExpert files one expert's projection under its stacked name; the
// experts are put in order (and gaps found) once every shard is read, so a
// hostile index costs nothing beyond its header entry.
func (h *HFDir) addExpert(stacked string, expert int, e stEntry) {
	e.expert = expert
	h.experts[stacked] = append(h.experts[stacked], e)
}

// checkExperts checks, once every shard is read, that each stacked tensor
// has experts 0…E−1 once each, all matrices of one dtype and shape, and
// puts them in order.
func (h *HFDir) checkExperts() error {
	// transformers 5's fused expert parameters have no per-expert tensors to stack.
	for _, name := range sortedKeys(h.tensors) {
		if strings.Contains(name, ".experts.gate_up_proj") || strings.HasSuffix(name, ".experts.down_proj") {
			return fmt.Errorf("hf %s: %q holds every expert fused; only one tensor per expert (experts.E.*) is read: %w", h.dir, name, ErrUnsupported)
		}
	}
	for _, name := range sortedKeys(h.experts) {
		parts := h.experts[name]
		slices.SortFunc(parts, func(a, b stEntry) int { return cmp.Compare(a.expert, b.expert) })
		first := parts[0]
		for i, e := range parts {
			switch {
			case i > 0 && e.expert == parts[i-1].expert:
				return fmt.Errorf("hf %s: tensors %q and %q are both expert %d of %s: %w", h.dir, parts[i-1].hfName, e.hfName, e.expert, name, ErrMalformed)
			case e.expert != i:
				return fmt.Errorf("hf %s: %s: expert %d of %d is missing: %w", h.dir, name, i, parts[len(parts)-1].expert+1, ErrMalformed)
			case len(e.shape) != 2:
				return fmt.Errorf("safetensors %s: expert tensor %q has shape %v (want a matrix): %w", h.files[e.file], e.hfName, e.shape, ErrMalformed)
			case e.dtype != first.dtype || e.shape[0] != first.shape[0] || e.shape[1] != first.shape[1]:
				return fmt.Errorf("hf %s: %s: expert %d is %s %v, expert 0 %s %v (a stack needs one dtype and shape): %w",
					h.dir, name, i, e.dtype, e.shape, first.dtype, first.shape, ErrMalformed)
			}
		}
		if prev, dup := h.tensors[name]; dup {
			return fmt.Errorf("hf %s: %q and the experts %q… both give %s: %w", h.dir, prev.hfName, first.hfName, name, ErrMalformed)
		}
	}
	return nil
}

// sharedGateShape: Qwen2-MoE's shared_expert_gate is a [1, hidden] Linear
// weight, which GGUF (and the loader) keep as the vector [hidden].
func sharedGateShape(name string, e *stEntry) {
	if strings.HasSuffix(name, ".ffn_gate_inp_shexp.weight") && len(e.shape) == 2 && e.shape[0] == 1 {
		e.shape = e.shape[1:]
	}
}

// stackedTensor copies the experts of a stacked tensor into one buffer
// [experts, rows, cols], releasing each expert's mapped pages once copied.
func (h *HFDir) stackedTensor(name string, parts []stEntry) (kernels.HostTensor, error) {
	if h.maps == nil {
		return kernels.HostTensor{}, fmt.Errorf("hf %s: tensor %q: %w", h.dir, name, ErrClosed)
	}
	first := parts[0]
	dt, ok := stDTypes[first.dtype]
	if !ok {
		return kernels.HostTensor{}, fmt.Errorf("safetensors %s: tensor %q: dtype %s (want F32, F16 or BF16): %w",
			h.files[first.file], first.hfName, first.dtype, ErrUnsupported)
	}
	per := first.end - first.begin
	buf := make([]byte, uint64(len(parts))*per)
	for i, e := range parts {
		m := h.maps[e.file]
		copy(buf[uint64(i)*per:], m[e.begin:e.end])
		releasePages(m, e.begin, e.end)
	}
	return kernels.HostTensor{Name: name, DType: dt, Shape: []int{len(parts), first.shape[0], first.shape[1]}, Data: buf}, nil
}

// releasePages drops the whole pages of m[begin:end] from this process's
// mapping. The map is read-only and file-backed, so a later read faults the
// same bytes back in from the page cache; the advice only keeps a copied
// expert from counting twice. Its error is not acted on for that reason.
func releasePages(m []byte, begin, end uint64) {
	ps := uint64(os.Getpagesize())
	lo, hi := (begin+ps-1)/ps*ps, end/ps*ps
	if hi > lo {
		_ = unix.Madvise(m[lo:hi], unix.MADV_DONTNEED)
	}
}

// expertSource says where the stacked expert tensors come from: "" for a
// dense checkpoint, else the per-expert tensors they are stacked from.
func (h *HFDir) expertSource() string {
	if d, ok := h.derived["blk.0.ffn_gate_exps.weight"]; ok {
		fused := strings.Replace(d.from[0].hfName, "model.layers.0.", "model.layers.N.", 1)
		return fmt.Sprintf("split at load from the fused %s, one copy per tensor", fused)
	}
	parts, ok := h.experts["blk.0.ffn_gate_exps.weight"]
	if !ok {
		return ""
	}
	name := parts[0].hfName
	sub := hfExpertTensor.FindStringSubmatchIndex(name)
	// model.layers.<N>.<block>.experts.<E>.<proj>.weight with N and E spelled out.
	generic := name[:sub[2]] + "N" + name[sub[3]:sub[4]] + "E" + name[sub[5]:sub[6]]
	projs := "{gate_proj,up_proj,down_proj}"
	if strings.HasSuffix(name, ".w1.weight") {
		projs = "{w1,w3,w2}"
	}
	return fmt.Sprintf("stacked at load from %d tensors each (%s%s.weight), one copy per stacked tensor", len(parts), generic, projs)
}

// expertLayout describes the stacked tensors the MoE kernels read, layer 0's
// as every layer's: shapes, types and where they come from.
func expertLayout(src WeightSource) string {
	lister, ok := src.(interface{ Tensors() []TensorInfo })
	if !ok {
		return ""
	}
	var shapes []string
	for _, kind := range []string{"gate", "up", "gate_up", "down"} { // gate_up: Gemma 4's fused experts
		name := "blk.0.ffn_" + kind + "_exps.weight"
		for _, t := range lister.Tensors() {
			if t.Name == name {
				shapes = append(shapes, fmt.Sprintf("%s %v %v", kind, t.DType, t.Shape))
			}
		}
	}
	if len(shapes) == 0 {
		return ""
	}
	from := "stacked in the file"
	if h, ok := src.(*HFDir); ok && h.expertSource() != "" {
		from = h.expertSource()
	}
	return fmt.Sprintf("blk.N.ffn_{gate,up,down}_exps: %s; %s", strings.Join(shapes, ", "), from)
}
