package models

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tokenizer/vocab"
)

// A safetensors file:
//
//	header_len u64 LE | header: JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}
//	data: each tensor at 8 + header_len + begin, row-major, little-endian
//
// A sharded checkpoint adds model.safetensors.index.json: {"weight_map": {name: shard file}}.

// stElemSize is the element size of every safetensors dtype, so that headers
// can be checked even for tensors Sluice will not compute with.
var stElemSize = map[string]uint64{
	"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4,
	"F16": 2, "BF16": 2, "I16": 2, "U16": 2,
	"I8": 1, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1,
}

var stDTypes = map[string]kernels.DType{"F32": kernels.F32, "F16": kernels.F16, "BF16": kernels.BF16}

type stEntry struct {
	file   int    // index into HFDir.maps
	hfName string // name in the checkpoint
	dtype  string
	shape  []int
	begin  uint64 // absolute offsets in the file
	end    uint64
	expert int // an expert's projection: its index in the stacked tensor (hfmoe.go)
}

// HFDir is a Hugging Face model directory: config.json and model.safetensors
// (or model.safetensors.index.json and its shards), each shard mapped
// read-only. Tensors are exposed under GGUF names (see WeightSource).
type HFDir struct {
	dir     string
	files   []string
	maps    [][]byte // nil after Close
	tensors map[string]stEntry
	// experts: a mixture's stacked tensors (blk.N.ffn_{gate,up,down}_exps),
	// each as its experts' entries in order, stacked by Tensor (hfmoe.go).
	experts map[string][]stEntry
	// config: tensors config.json holds (Phi-3's LongRoPE factors), F32,
	// owned here.
	config map[string]kernels.HostTensor
	// derived: tensors computed from others when asked for (gpt-oss's
	// fused experts split into GGUF's, gptoss_hf.go).
	derived map[string]hfDerived
}

// OpenHF maps the safetensors of the model directory dir and checks their headers.
func OpenHF(dir string) (*HFDir, error) {
	h := &HFDir{dir: dir, tensors: map[string]stEntry{}, experts: map[string][]stEntry{}, derived: map[string]hfDerived{}}
	wanted, err := h.shards()
	if err != nil {
		return nil, err
	}
	for _, shard := range sortedKeys(wanted) {
		if err := h.openShard(shard, wanted[shard]); err != nil {
			_ = h.Close()
			return nil, err
		}
	}
	switch arch := hfArchitecture(dir); {
	case arch == "GptOssForCausalLM":
		err = h.gptossTensors()
	case isHFQwen35(arch):
		err = h.qwen35Tensors()
	case arch == "Gemma4ForCausalLM" || arch == "Gemma4ForConditionalGeneration":
		err = h.gemma4RopeFreqs()
	}
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	if err := h.checkExperts(); err != nil {
		_ = h.Close()
		return nil, err
	}
	h.gemmaNormNames()
	if err := h.longRoPEFactors(); err != nil {
		_ = h.Close()
		return nil, err
	}
	return h, nil
}

// longRoPEFactors exposes a Phi-3 checkpoint's rope_scaling.short_factor and
// long_factor as the F32 tensors a GGUF file stores them in
// (rope_factors_short.weight, rope_factors_long.weight), so that the loader
// reads them one way (phi3Frequencies); Config checks their count.
func (h *HFDir) longRoPEFactors() error {
	path := filepath.Join(h.dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil // Config reports it
	}
	var hc hfConfig
	if json.Unmarshal(raw, &hc) != nil || len(hc.Architectures) == 0 || hc.Architectures[0] != "Phi3ForCausalLM" || hc.RopeScaling == nil {
		return nil
	}
	// Factors beside another type are not applied (transformers ignores them).
	if typ := cmp.Or(hc.RopeScaling.RopeType, hc.RopeScaling.Type); typ != "longrope" && typ != "su" {
		return nil
	}
	for name, f := range map[string][]float64{"rope_factors_short.weight": hc.RopeScaling.ShortFactor, "rope_factors_long.weight": hc.RopeScaling.LongFactor} {
		if f == nil {
			continue
		}
		if _, dup := h.tensors[name]; dup {
			return fmt.Errorf("hf %s: %s is both a tensor and config.json's rope_scaling: %w", h.dir, name, ErrMalformed)
		}
		data := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(v)))
		}
		if h.config == nil {
			h.config = map[string]kernels.HostTensor{}
		}
		h.config[name] = kernels.HostTensor{Name: name, DType: kernels.F32, Shape: []int{len(f)}, Data: data}
	}
	return nil
}

// gemmaNormNames: in a Gemma checkpoint post_attention_layernorm is the norm
// after attention (GGUF post_attention_norm) and pre_feedforward_layernorm
// the one before the feed-forward (ffn_norm); in the Llama family
// post_attention_layernorm is the latter. A layer with a
// pre_feedforward_layernorm says which.
func (h *HFDir) gemmaNormNames() {
	for name, e := range h.tensors {
		layer, ok := strings.CutSuffix(name, "pre_ffw_norm.weight")
		if !ok {
			continue
		}
		if post, ok := h.tensors[layer+"ffn_norm.weight"]; ok {
			h.tensors[layer+"post_attention_norm.weight"] = post
		}
		h.tensors[layer+"ffn_norm.weight"] = e
		delete(h.tensors, name)
	}
}

// shards lists the shard files and, for a sharded checkpoint, the tensor
// names the index places in each (nil: take whatever the file holds).
func (h *HFDir) shards() (map[string][]string, error) {
	single := filepath.Join(h.dir, "model.safetensors")
	if _, err := os.Stat(single); err == nil {
		return map[string][]string{"model.safetensors": nil}, nil
	}
	idxPath := filepath.Join(h.dir, "model.safetensors.index.json")
	raw, err := os.ReadFile(idxPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("hf %s: neither model.safetensors nor model.safetensors.index.json: %w", h.dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("hf %s: %w: %w", idxPath, ErrMalformed, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("hf %s: empty weight_map: %w", idxPath, ErrMalformed)
	}
	out := map[string][]string{}
	for name, file := range idx.WeightMap {
		if file != filepath.Base(file) || file == "." || file == ".." {
			return nil, fmt.Errorf("hf %s: tensor %q: shard %q is not a file in the directory: %w", idxPath, name, file, ErrMalformed)
		}
		out[file] = append(out[file], name)
	}
	return out, nil
}

func (h *HFDir) openShard(name string, want []string) error {
	path := filepath.Join(h.dir, name)
	data, err := mmapFile(path)
	if err != nil {
		return err
	}
	h.files = append(h.files, path)
	h.maps = append(h.maps, data)
	entries, err := parseSafetensors(data)
	if err != nil {
		return fmt.Errorf("safetensors %s: %w", path, err)
	}
	if want == nil {
		for n := range entries {
			want = append(want, n)
		}
	}
	for _, hfName := range want {
		e, ok := entries[hfName]
		if !ok {
			return fmt.Errorf("safetensors %s: tensor %q listed in the index: %w", path, hfName, ErrNoTensor)
		}
		e.file = len(h.maps) - 1
		if stacked, expert, ok := hfExpertName(hfLanguageModel(hfName)); ok {
			h.addExpert(stacked, expert, e)
			continue
		}
		name := hfToGGUF(hfName)
		sharedGateShape(name, &e)
		if prev, dup := h.tensors[name]; dup {
			return fmt.Errorf("safetensors %s: tensors %q and %q both map to %q: %w", path, prev.hfName, hfName, name, ErrMalformed)
		}
		h.tensors[name] = e
	}
	return nil
}

func mmapFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("hf %s: %w", path, err)
	}
	if st.Size() < 8 || st.Size() > math.MaxInt {
		return nil, fmt.Errorf("safetensors %s: size %d: %w", path, st.Size(), ErrMalformed)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("safetensors %s: mmap: %w", path, err)
	}
	return data, nil
}

// parseSafetensors checks a safetensors header against the file: known
// dtypes, offsets inside the data section, sizes equal to shape × element size.
func parseSafetensors(data []byte) (map[string]stEntry, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%d bytes is too short for a header: %w", len(data), ErrMalformed)
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data))-8 {
		return nil, fmt.Errorf("header of %d bytes beyond the end of the file (%d bytes): %w", n, len(data), ErrMalformed)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		return nil, fmt.Errorf("header: %w: %w", ErrMalformed, err)
	}
	dataStart := 8 + n
	dataLen := uint64(len(data)) - dataStart
	out := make(map[string]stEntry, len(header))
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var info struct {
			DType   string   `json:"dtype"`
			Shape   []uint64 `json:"shape"`
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &info); err != nil {
			return nil, fmt.Errorf("tensor %q: %w: %w", name, ErrMalformed, err)
		}
		size, ok := stElemSize[info.DType]
		if !ok {
			return nil, fmt.Errorf("tensor %q: dtype %q: %w", name, info.DType, ErrUnsupported)
		}
		shape := make([]int, len(info.Shape))
		for i, d := range info.Shape {
			hi, lo := bits.Mul64(size, d)
			if hi != 0 || lo > maxElems {
				return nil, fmt.Errorf("tensor %q: shape %v overflows: %w", name, info.Shape, ErrMalformed)
			}
			size = lo
			shape[i] = int(d)
		}
		if len(info.Offsets) != 2 || info.Offsets[0] > info.Offsets[1] || info.Offsets[1] > dataLen {
			return nil, fmt.Errorf("tensor %q: data_offsets %v outside the %d-byte data section: %w", name, info.Offsets, dataLen, ErrMalformed)
		}
		if got := info.Offsets[1] - info.Offsets[0]; got != size {
			return nil, fmt.Errorf("tensor %q: %d bytes for shape %v of %s (want %d): %w", name, got, info.Shape, info.DType, size, ErrMalformed)
		}
		out[name] = stEntry{hfName: name, dtype: info.DType, shape: shape,
			begin: dataStart + info.Offsets[0], end: dataStart + info.Offsets[1]}
	}
	return out, nil
}

var hfLayerName = regexp.MustCompile(`^model\.layers\.(\d+)\.(.+)$`)

// hfLayerParts maps the per-layer suffix of a Llama/Qwen2 checkpoint name to GGUF's.
var hfLayerParts = map[string]string{
	"input_layernorm.weight":          "attn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.q_proj.bias":           "attn_q.bias",
	"self_attn.k_proj.bias":           "attn_k.bias",
	"self_attn.v_proj.bias":           "attn_v.bias",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight", // Gemma: see gemmaNormNames
	// Gemma's four norms per layer; pre_ffw_norm is renamed once the
	// checkpoint is known to be Gemma's (gemmaNormNames).
	"pre_feedforward_layernorm.weight":  "pre_ffw_norm.weight",
	"post_feedforward_layernorm.weight": "post_ffw_norm.weight",
	"mlp.gate_proj.weight":              "ffn_gate.weight",
	"mlp.up_proj.weight":                "ffn_up.weight",
	"mlp.down_proj.weight":              "ffn_down.weight",
	// Phi-3's fused projections: q, k, v rows and gate, up rows, split at
	// load (phi3Layer) as GGUF's attn_qkv and ffn_up are.
	"self_attn.qkv_proj.weight": "attn_qkv.weight",
	"mlp.gate_up_proj.weight":   "ffn_up.weight",
	// A mixture's router (Mixtral's block_sparse_moe, the others' mlp) and
	// Qwen2-MoE's shared expert; the experts are stacked (hfmoe.go).
	"block_sparse_moe.gate.weight":       "ffn_gate_inp.weight",
	"mlp.gate.weight":                    "ffn_gate_inp.weight",
	"mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight",
	"mlp.shared_expert.up_proj.weight":   "ffn_up_shexp.weight",
	"mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight",
	"mlp.shared_expert_gate.weight":      "ffn_gate_inp_shexp.weight",
	// gpt-oss: the output projection's bias, each head's sink and the
	// router (a biased Linear); its fused experts are gptoss_hf.go's.
	"self_attn.o_proj.bias": "attn_output.bias",
	"self_attn.sinks":       "attn_sinks.weight",
	"mlp.router.weight":     "ffn_gate_inp.weight",
	"mlp.router.bias":       "ffn_gate_inp.bias",
	// Gemma 4's scale of the residual stream at a layer's end, and
	// E2B/E4B's per-layer input.
	"layer_scalar":                     "layer_output_scale.weight",
	"per_layer_input_gate.weight":      "inp_gate.weight",
	"per_layer_projection.weight":      "proj.weight",
	"post_per_layer_input_norm.weight": "post_norm.weight",
	// Gemma 4 26B-A4B's mixture beside the dense FFN: the router (its
	// input scale and per-expert output scales), the experts fused as
	// transformers keeps them ([E, 2·ffn, hidden], each expert's gate rows
	// then its up rows, as GGUF's ffn_gate_up_exps) and the branch norms.
	"router.proj.weight":                  "ffn_gate_inp.weight",
	"router.scale":                        "ffn_gate_inp.scale",
	"router.per_expert_scale":             "ffn_down_exps.scale",
	"experts.gate_up_proj":                "ffn_gate_up_exps.weight",
	"experts.down_proj":                   "ffn_down_exps.weight",
	"pre_feedforward_layernorm_2.weight":  "pre_ffw_norm_2.weight",
	"post_feedforward_layernorm_1.weight": "post_ffw_norm_1.weight",
	"post_feedforward_layernorm_2.weight": "post_ffw_norm_2.weight",
}

var hfTopNames = map[string]string{
	"model.embed_tokens.weight": "token_embd.weight",
	"model.norm.weight":         "output_norm.weight",
	"lm_head.weight":            "output.weight",
	// Gemma 4 E2B/E4B's per-layer inputs.
	"model.embed_tokens_per_layer.weight":     "per_layer_token_embd.weight",
	"model.per_layer_model_projection.weight": "per_layer_model_proj.weight",
	"model.per_layer_projection_norm.weight":  "per_layer_proj_norm.weight",
}

// hfLanguageModel is a multimodal checkpoint's language-model tensor name
// as the text model's: Gemma3ForConditionalGeneration (and Gemma 4's,
// Qwen3.5's) nest it, language_model.model.* before transformers 4.52,
// model.language_model.* since. The vision tower keeps its own names and is
// never loaded.
func hfLanguageModel(name string) string {
	if rest, ok := strings.CutPrefix(name, "model.language_model."); ok {
		return "model." + rest
	} else if rest, ok := strings.CutPrefix(name, "language_model."); ok {
		return rest
	}
	return name
}

// hfToGGUF renames a checkpoint tensor; names it does not know keep their own.
func hfToGGUF(name string) string {
	name = hfLanguageModel(name)
	if g, ok := hfTopNames[name]; ok {
		return g
	}
	if m := hfLayerName.FindStringSubmatch(name); m != nil {
		if part, ok := hfLayerParts[m[2]]; ok {
			return "blk." + m[1] + "." + part
		}
	}
	return name
}

// Path is the directory.
func (h *HFDir) Path() string { return h.dir }

// Config reads config.json.
func (h *HFDir) Config() (Config, error) {
	return readHFConfig(filepath.Join(h.dir, "config.json"), h.Has)
}

// Vocab is nil: a Hugging Face directory's tokenizer is its tokenizer.json.
func (h *HFDir) Vocab() (*vocab.Vocab, error) { return nil, nil }

// Has reports whether the checkpoint holds the tensor (GGUF name).
func (h *HFDir) Has(name string) bool {
	_, ok := h.tensors[name]
	if !ok {
		_, ok = h.experts[name]
	}
	if !ok {
		_, ok = h.config[name]
	}
	if !ok {
		_, ok = h.derived[name]
	}
	return ok
}

// Tensors lists the tensors Sluice can load (F32, F16, BF16) under their GGUF
// names, sorted; Offset is from the start of the tensor's shard. A stacked
// expert tensor is listed as the loader gets it, [experts, rows, cols], with
// the Offset of expert 0 and the Size of all.
func (h *HFDir) Tensors() []TensorInfo {
	var out []TensorInfo
	for _, name := range sortedKeys(h.tensors) {
		e := h.tensors[name]
		if dt, ok := stDTypes[e.dtype]; ok {
			out = append(out, TensorInfo{Name: name, DType: dt, Shape: append([]int(nil), e.shape...), Offset: e.begin, Size: e.end - e.begin})
		}
	}
	for name, parts := range h.experts {
		e := parts[0]
		if dt, ok := stDTypes[e.dtype]; ok {
			out = append(out, TensorInfo{Name: name, DType: dt, Shape: []int{len(parts), e.shape[0], e.shape[1]},
				Offset: e.begin, Size: uint64(len(parts)) * (e.end - e.begin)})
		}
	}
	for name, d := range h.derived {
		// Offset: the first source tensor's; the tensor is built from it.
		out = append(out, TensorInfo{Name: name, DType: d.dtype, Shape: append([]int(nil), d.shape...), Offset: d.from[0].begin, Size: d.bytes()})
	}
	for name, t := range h.config {
		// Offset 0: the values are config.json's, in no shard.
		out = append(out, TensorInfo{Name: name, DType: t.DType, Shape: append([]int(nil), t.Shape...), Size: uint64(len(t.Data))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Tensor returns the tensor called name (GGUF convention); Data is a slice of
// the shard's mmap, except for a stacked expert tensor, a new buffer on every
// call that HFDir does not keep.
func (h *HFDir) Tensor(name string) (kernels.HostTensor, error) {
	if parts, ok := h.experts[name]; ok {
		return h.stackedTensor(name, parts)
	}
	if d, ok := h.derived[name]; ok {
		return h.derivedTensor(name, d)
	}
	if t, ok := h.config[name]; ok {
		if h.maps == nil {
			return kernels.HostTensor{}, fmt.Errorf("hf %s: tensor %q: %w", h.dir, name, ErrClosed)
		}
		t.Shape = append([]int(nil), t.Shape...)
		return t, nil
	}
	e, ok := h.tensors[name]
	if !ok {
		return kernels.HostTensor{}, fmt.Errorf("hf %s: tensor %q: %w", h.dir, name, ErrNoTensor)
	}
	if h.maps == nil {
		return kernels.HostTensor{}, fmt.Errorf("hf %s: tensor %q: %w", h.dir, name, ErrClosed)
	}
	dt, ok := stDTypes[e.dtype]
	if !ok {
		return kernels.HostTensor{}, fmt.Errorf("safetensors %s: tensor %q: dtype %s (want F32, F16 or BF16): %w",
			h.files[e.file], e.hfName, e.dtype, ErrUnsupported)
	}
	if len(e.shape) == 0 {
		return kernels.HostTensor{}, fmt.Errorf("safetensors %s: tensor %q is a scalar: %w", h.files[e.file], e.hfName, ErrUnsupported)
	}
	return kernels.HostTensor{
		Name:  name,
		DType: dt,
		Shape: append([]int(nil), e.shape...),
		Data:  h.maps[e.file][e.begin:e.end:e.end],
	}, nil
}

// Close unmaps every shard. Tensor data handed out earlier must not be used after.
func (h *HFDir) Close() error {
	var errs []error
	for i, m := range h.maps {
		if err := syscall.Munmap(m); err != nil {
			errs = append(errs, fmt.Errorf("safetensors %s: munmap: %w", h.files[i], err))
		}
	}
	h.maps = nil
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
