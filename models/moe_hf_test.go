package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models/modeltest"
)

// moeHFSpecs are the four mixture architectures read from safetensors, each
// with more experts than it routes to so a wrongly stacked expert changes
// the logits.
func moeHFSpecs() map[string]modeltest.Spec {
	base := modeltest.Spec{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, Seed: 61, Experts: 6, ExpertsUsed: 2}
	qwen3moe, qwen2moe, olmoe := base, base, base
	qwen3moe.QKNorm, qwen3moe.FFN, qwen3moe.ExpertFFN = true, 96, 32
	qwen2moe.QKVBias, qwen2moe.FFN, qwen2moe.ExpertFFN, qwen2moe.SharedExpertFFN = true, 96, 32, 48
	olmoe.OLMoE = true
	return map[string]modeltest.Spec{"mixtral": base, "qwen3moe": qwen3moe, "qwen2moe": qwen2moe, "olmoe": olmoe}
}

// writeBoth writes spec as GGUF and as a Hugging Face directory, both in dtype.
func writeBoth(t *testing.T, spec modeltest.Spec, dtype kernels.DType) (gguf, hf string) {
	t.Helper()
	dir := t.TempDir()
	gguf, hf = filepath.Join(dir, "m.gguf"), filepath.Join(dir, "hf")
	if err := modeltest.WriteGGUF(gguf, spec, dtype); err != nil {
		t.Fatal(err)
	}
	if err := modeltest.WriteHF(hf, spec, dtype); err != nil {
		t.Fatal(err)
	}
	return gguf, hf
}

// moeLogits runs the model at path over a prefill of seven tokens (in chunks
// of loadTinyAt's three rows, so routing groups several rows per expert)
// and five decode steps, returning each call's logits.
func moeLogits(t *testing.T, path string) (Config, [][]float32) {
	t.Helper()
	m := loadTinyAt(t, path)
	r := newSoloRunner(m)
	out := [][]float32{slices.Clone(r.feed(t, []int32{1, 17, 42, 99, 3, 250, 7}))}
	for _, tok := range []int32{120, 64, 33, 5, 250} {
		out = append(out, slices.Clone(r.feed(t, []int32{tok})))
	}
	return m.Config(), out
}

// TestMoEHFMatchesGGUF: each mixture written as GGUF F32 and as a
// checkpoint F32 (one tensor per expert, stacked at load) reads as the same
// configuration and gives bit-identical logits. Mixtral's GGUF holds Q and K
// permuted for interleaved RoPE, which sums each head's q·k in another
// order; its logits agree to float32 rounding instead.
func TestMoEHFMatchesGGUF(t *testing.T) {
	for name, spec := range moeHFSpecs() {
		t.Run(name, func(t *testing.T) {
			gguf, hf := writeBoth(t, spec, kernels.F32)
			gc, want := moeLogits(t, gguf)
			hc, got := moeLogits(t, hf)
			if spec.Arch() == "llama" {
				if gc.RopeStyle != kernels.RoPEInterleaved || hc.RopeStyle != kernels.RoPEHalves {
					t.Errorf("rope styles %v (GGUF), %v (checkpoint); want interleaved and halves", gc.RopeStyle, hc.RopeStyle)
				}
				gc.RopeStyle = hc.RopeStyle
			}
			if !reflect.DeepEqual(gc, hc) {
				t.Fatalf("configs differ:\nGGUF       %+v\ncheckpoint %+v", gc, hc)
			}
			if hc.Experts != spec.Experts || hc.ExpertsUsed != spec.ExpertsUsed {
				t.Fatalf("checkpoint config %+v: want %d experts, %d used", hc, spec.Experts, spec.ExpertsUsed)
			}
			worst, exact := 0.0, spec.Arch() != "llama"
			for s := range want {
				for i := range want[s] {
					worst = max(worst, math.Abs(float64(got[s][i]-want[s][i])))
				}
			}
			t.Logf("largest |checkpoint − GGUF| logit over %d calls: %.3g", len(want), worst)
			if exact && worst != 0 || worst > 1e-4 {
				t.Errorf("logits differ by up to %g between the checkpoint and GGUF", worst)
			}
		})
	}
}

// TestMoEHFStacking: in F32, F16 and BF16, every mixture tensor the loader
// asks for (router, stacked experts, shared expert) holds the GGUF file's
// bytes and shape, Tensors lists it at its full size, and the stacked buffer
// is a new one each call, so HFDir keeps no second copy.
func TestMoEHFStacking(t *testing.T) {
	for name, spec := range moeHFSpecs() {
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16} {
			t.Run(fmt.Sprintf("%s-%v", name, dt), func(t *testing.T) {
				gguf, hf := writeBoth(t, spec, dt)
				g, err := Open(gguf)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				h, err := OpenHF(hf)
				if err != nil {
					t.Fatal(err)
				}
				defer h.Close()
				listed := map[string]TensorInfo{}
				for _, ti := range h.Tensors() {
					listed[ti.Name] = ti
				}
				checked := 0
				for name := range modeltest.Shapes(spec) {
					if !strings.Contains(name, "ffn_") || strings.HasSuffix(name, "ffn_norm.weight") {
						continue
					}
					gt, err1 := g.Tensor(name)
					ht, err2 := h.Tensor(name)
					if err1 != nil || err2 != nil {
						t.Fatal(err1, err2)
					}
					if gt.DType == dt && (ht.DType != gt.DType || !bytes.Equal(ht.Data, gt.Data)) || !slices.Equal(ht.Shape, gt.Shape) {
						t.Fatalf("%s: checkpoint %v %v, GGUF %v %v (or the bytes differ)", name, ht.DType, ht.Shape, gt.DType, gt.Shape)
					}
					if li := listed[name]; li.Size != uint64(len(ht.Data)) || !slices.Equal(li.Shape, ht.Shape) {
						t.Errorf("%s: Tensors lists %v, %d bytes; Tensor gives %v, %d", name, li.Shape, li.Size, ht.Shape, len(ht.Data))
					}
					if strings.HasSuffix(name, "_exps.weight") {
						again, err := h.Tensor(name)
						if err != nil || !bytes.Equal(again.Data, ht.Data) || &again.Data[0] == &ht.Data[0] {
							t.Fatalf("%s: a second Tensor call: %v; same bytes %v, same buffer %v", name, err, bytes.Equal(again.Data, ht.Data), &again.Data[0] == &ht.Data[0])
						}
					}
					checked++
				}
				if want := spec.Layers * (4 + 4*min(spec.SharedExpertFFN, 1)); checked != want {
					t.Fatalf("checked %d mixture tensors, want %d", checked, want)
				}
			})
		}
	}
}

// TestMoEHFConfig: config.json's mixture keys as transformers reads them,
// and the combinations the forward pass cannot run refused by name.
func TestMoEHFConfig(t *testing.T) {
	specs := moeHFSpecs()
	read := func(t *testing.T, arch string, edit func(map[string]any) map[string]any) (Config, error) {
		return tinyHFConfig(t, specs[arch], edit)
	}
	keep := func(c map[string]any) map[string]any { return c }
	for _, tc := range []struct {
		arch  string
		edit  func(map[string]any) map[string]any
		check func(Config) bool
		want  string
	}{
		{"qwen2moe", keep, func(c Config) bool {
			return c.Arch == "qwen2moe" && c.FFN == 96 && c.ExpertFFN == 32 && c.SharedExpertFFN == 48 && !c.ExpertNorm && c.QKVBias
		}, "qwen2moe, ffn 96, experts 32 wide, shared 48, weights as routed, QKV bias"},
		{"qwen2moe", func(c map[string]any) map[string]any { c["norm_topk_prob"] = true; return c },
			func(c Config) bool { return c.ExpertNorm }, "norm_topk_prob true renormalises"},
		{"qwen3moe", keep, func(c Config) bool {
			return c.Arch == "qwen3moe" && c.QKNorm && !c.QKNormWhole && c.ExpertNorm && c.ExpertFFN == 32
		},
			"qwen3moe, per-head QK-norm, renormalised"},
		{"qwen3moe", func(c map[string]any) map[string]any { delete(c, "norm_topk_prob"); return c },
			func(c Config) bool { return !c.ExpertNorm }, "norm_topk_prob absent: transformers' false"},
		{"olmoe", keep, func(c Config) bool {
			return c.Arch == "olmoe" && c.QKNorm && c.QKNormWhole && !c.ExpertNorm && c.ExpertFFN == 64
		},
			"olmoe, whole-projection QK-norm, experts intermediate_size wide"},
		{"mixtral", keep, func(c Config) bool {
			return c.Arch == "llama" && c.Experts == 6 && c.ExpertNorm && c.Window == 0 && c.RopeStyle == kernels.RoPEHalves
		},
			"llama with experts, renormalised, no window"},
		{"mixtral", func(c map[string]any) map[string]any { c["sliding_window"] = 4; return c },
			func(c Config) bool {
				return c.Window == 4 && slices.Equal(c.WindowLayers, []bool{true, true}) && c.RopeThetaLocal == c.RopeTheta
			},
			"sliding_window 4 on every layer"},
		{"mixtral", func(c map[string]any) map[string]any { delete(c, "rms_norm_eps"); delete(c, "rope_theta"); return c },
			func(c Config) bool { return c.RMSEps == 1e-5 && c.RopeTheta == 1e6 }, "MixtralConfig's defaults: eps 1e-5, theta 1e6"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			c, err := read(t, tc.arch, tc.edit)
			if err != nil || !tc.check(c) {
				t.Fatalf("config %+v, %v; want %s", c, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		arch string
		edit func(map[string]any) map[string]any
		want error
		text string
	}{
		{"qwen2moe", func(c map[string]any) map[string]any { c["decoder_sparse_step"] = 2; return c }, ErrUnsupported, "decoder_sparse_step = 2"},
		{"qwen3moe", func(c map[string]any) map[string]any { c["decoder_sparse_step"] = 0; return c }, ErrMalformed, "decoder_sparse_step = 0"},
		{"qwen3moe", func(c map[string]any) map[string]any { c["mlp_only_layers"] = []int{1}; return c }, ErrUnsupported, "mlp_only_layers [1]"},
		{"qwen2moe", func(c map[string]any) map[string]any { c["use_sliding_window"] = true; return c }, ErrUnsupported, "use_sliding_window"},
		{"olmoe", func(c map[string]any) map[string]any { c["clip_qkv"] = 8.0; return c }, ErrUnsupported, "clip_qkv = 8"},
		{"mixtral", func(c map[string]any) map[string]any { delete(c, "num_local_experts"); return c }, ErrMissingKey, "num_local_experts"},
		{"olmoe", func(c map[string]any) map[string]any { delete(c, "num_experts_per_tok"); return c }, ErrMissingKey, "num_experts_per_tok"},
		{"qwen3moe", func(c map[string]any) map[string]any { delete(c, "moe_intermediate_size"); return c }, ErrMissingKey, "moe_intermediate_size"},
		{"qwen2moe", func(c map[string]any) map[string]any { delete(c, "shared_expert_intermediate_size"); return c }, ErrMissingKey, "shared_expert_intermediate_size"},
		{"qwen2moe", func(c map[string]any) map[string]any { c["shared_expert_intermediate_size"] = 0; return c }, ErrMalformed, "shared_expert_intermediate_size = 0"},
		{"qwen3moe", func(c map[string]any) map[string]any { c["num_experts"] = 0; return c }, ErrUnsupported, "num_experts = 0"},
		{"mixtral", func(c map[string]any) map[string]any { c["num_experts_per_tok"] = 7; return c }, ErrMalformed, "6 experts, 7 used"},
		{"mixtral", func(c map[string]any) map[string]any { c["hidden_act"] = "gelu"; return c }, ErrUnsupported, `hidden_act "gelu"`},
	} {
		t.Run(tc.text, func(t *testing.T) {
			if _, err := read(t, tc.arch, tc.edit); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
}

// TestMoEHFLoadRefusals: checkpoints whose experts cannot be stacked, or do
// not match config.json, fail at open or load, naming the tensor.
func TestMoEHFLoadRefusals(t *testing.T) {
	spec := moeHFSpecs()["qwen3moe"]
	expert := func(e int, proj string) string {
		return fmt.Sprintf("model.layers.1.mlp.experts.%d.%s.weight", e, proj)
	}
	for _, tc := range []struct {
		name   string
		rename func(string) string
		want   error
		text   string
	}{
		{"an expert missing", func(n string) string {
			if n == expert(2, "up_proj") {
				return expert(9, "up_proj")
			}
			return n
		}, ErrMalformed, "blk.1.ffn_up_exps.weight: expert 2 of 10 is missing"},
		{"an expert twice", func(n string) string {
			if n == expert(1, "up_proj") {
				return "model.layers.1.block_sparse_moe.experts.0.w3.weight"
			}
			return n
		}, ErrMalformed, "are both expert 0 of blk.1.ffn_up_exps.weight"},
		{"transformers 5's fused experts", func(n string) string {
			return strings.Replace(n, "layers.0.mlp.experts.0.gate_proj.weight", "layers.0.mlp.experts.gate_up_proj", 1)
		}, ErrUnsupported, "experts.gate_up_proj"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hf := filepath.Join(t.TempDir(), "hf")
			if err := modeltest.WriteHF(hf, spec, kernels.F32); err != nil {
				t.Fatal(err)
			}
			renameSafetensors(t, filepath.Join(hf, "model.safetensors"), tc.rename)
			if h, err := OpenHF(hf); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				if err == nil {
					h.Close()
				}
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.text)
			}
		})
	}
	// Experts of one stack in two dtypes or shapes.
	for _, tc := range []struct {
		name string
		e1   modeltest.Tensor
		text string
	}{
		{"two dtypes", modeltest.Tensor{DType: kernels.F16, Shape: []int{4, 8}, Data: make([]byte, 64)}, "expert 1 is F16 [4 8], expert 0 F32 [4 8]"},
		{"two shapes", modeltest.Tensor{DType: kernels.F32, Shape: []int{8, 4}, Data: make([]byte, 128)}, "expert 1 is F32 [8 4], expert 0 F32 [4 8]"},
		{"not a matrix", modeltest.Tensor{DType: kernels.F32, Shape: []int{32}, Data: make([]byte, 128)}, "has shape [32] (want a matrix)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e0 := modeltest.Tensor{Name: "model.layers.0.block_sparse_moe.experts.0.w1.weight", DType: kernels.F32, Shape: []int{4, 8}, Data: make([]byte, 128)}
			tc.e1.Name = "model.layers.0.block_sparse_moe.experts.1.w1.weight"
			if err := modeltest.WriteSafetensors(filepath.Join(dir, "model.safetensors"), []modeltest.Tensor{e0, tc.e1}); err != nil {
				t.Fatal(err)
			}
			if h, err := OpenHF(dir); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.text) {
				if err == nil {
					h.Close()
				}
				t.Fatalf("err = %v, want ErrMalformed mentioning %q", err, tc.text)
			}
		})
	}
	// config.json counting more experts than the checkpoint holds.
	hf := filepath.Join(t.TempDir(), "hf")
	if err := modeltest.WriteHF(hf, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	editJSON(t, hf, func(c map[string]any) map[string]any { c["num_experts"] = 8; return c })
	src, err := OpenHF(hf)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := Load(src, cpuBackend(t), Options{MaxBatchTokens: 4, MaxSeqs: 1, KVBlocks: 4}); err == nil || !strings.Contains(err.Error(), "ffn_gate_inp.weight has shape [6 64], want [8 64]") {
		t.Fatalf("load with 8 experts configured and 6 stored: %v", err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Tensor("blk.0.ffn_gate_exps.weight"); !errors.Is(err, ErrClosed) {
		t.Fatalf("stacked tensor after Close: %v, want ErrClosed", err)
	}
}

// TestMoEHFDescribe: sluice inspect's expert layout line says where the
// stacked tensors come from in each format.
func TestMoEHFDescribe(t *testing.T) {
	gguf, hf := writeBoth(t, moeHFSpecs()["mixtral"], kernels.F32)
	for path, want := range map[string]string{
		gguf: "blk.N.ffn_{gate,up,down}_exps: gate F32 [6 64 64], up F32 [6 64 64], down F32 [6 64 64]; stacked in the file",
		hf: "blk.N.ffn_{gate,up,down}_exps: gate F32 [6 64 64], up F32 [6 64 64], down F32 [6 64 64]; stacked at load from 6 tensors each " +
			"(model.layers.N.block_sparse_moe.experts.E.{w1,w3,w2}.weight), one copy per stacked tensor",
	} {
		src, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := src.Config()
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for _, f := range Describe(c, src) {
			if f.Key == "expert layout" {
				got = f.Value
			}
		}
		src.Close()
		if got != want {
			t.Errorf("%s: expert layout %q, want %q", filepath.Base(path), got, want)
		}
	}
}

// cpuBackend is a one-thread CPU backend closed when the test ends.
func cpuBackend(t *testing.T) kernels.Backend {
	t.Helper()
	be := cpu.New(1)
	t.Cleanup(func() { be.Close() })
	return be
}

// TestMixtralHFWindow: a Mixtral checkpoint's sliding_window holds on its
// (mixture) layer: the logits at each position are those of the last w
// tokens alone, and without the window they are not.
func TestMixtralHFWindow(t *testing.T) {
	const w = 5
	spec := moeHFSpecs()["mixtral"]
	spec.Layers = 1
	load := func(window any) *Llama {
		dir := filepath.Join(t.TempDir(), "hf")
		if err := modeltest.WriteHF(dir, spec, kernels.F32); err != nil {
			t.Fatal(err)
		}
		editJSON(t, dir, func(c map[string]any) map[string]any { c["sliding_window"] = window; return c })
		src, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		m, err := Load(src, cpuBackend(t), Options{MaxBatchTokens: 16, MaxSeqs: 1, BlockSize: 4, KVBlocks: 8})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := load(w)
	if c := m.Config(); c.Window != w || !slices.Equal(c.WindowLayers, []bool{true}) || c.Experts != spec.Experts {
		t.Fatalf("sliding_window %d: config %+v", w, c)
	}
	checkWindowLogits(t, w, m, load(w), load(nil), load(nil))
}

// mappedRSS is how much of the mapping of file is resident in this process
// (/proc/self/smaps), in bytes.
func mappedRSS(t *testing.T, file string) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	var total int64
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			in = f[len(f)-1] == file
		case in && len(f) == 3 && f[0] == "Rss:":
			var kb int64
			fmt.Sscan(f[1], &kb)
			total += kb << 10
		}
	}
	return total
}

// TestMoEHFStackReleasesPages: stacking a layer's experts leaves their
// pages of the mapped checkpoint unmapped again, so a loaded mixture does
// not hold its experts both in its stacked buffers and in the mapping. The
// control reads every page first, so the measure can see them resident.
func TestMoEHFStackReleasesPages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/smaps")
	}
	spec := modeltest.Spec{Layers: 1, Hidden: 256, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 300, Seed: 71, Experts: 8, ExpertsUsed: 2, QKNorm: true}
	hf := filepath.Join(t.TempDir(), "hf")
	if err := modeltest.WriteHF(hf, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	file, err := filepath.EvalSymlinks(filepath.Join(hf, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := OpenHF(hf)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var sum byte
	for i := 0; i < len(h.maps[0]); i += os.Getpagesize() {
		sum += h.maps[0][i]
	}
	before := mappedRSS(t, file)
	var stacked int64
	for _, kind := range []string{"gate", "up", "down"} {
		ht, err := h.Tensor("blk.0.ffn_" + kind + "_exps.weight")
		if err != nil {
			t.Fatal(err)
		}
		stacked += int64(len(ht.Data))
	}
	after := mappedRSS(t, file)
	t.Logf("mapping resident: %d KiB with every page read, %d KiB after stacking %d KiB of experts (checksum %d)", before>>10, after>>10, stacked>>10, sum)
	if before < stacked {
		t.Fatalf("only %d bytes resident after reading every page of a file with %d bytes of experts: the measure is blind", before, stacked)
	}
	if released := before - after; released < stacked-int64(3*2*spec.Experts*os.Getpagesize()) {
		t.Errorf("stacking %d bytes of experts released %d bytes of the mapping", stacked, released)
	}
}

// TestMoEHFShardedExperts: a checkpoint whose experts are spread over two
// shards (odd experts in the second, as a large checkpoint splits a layer)
// stacks them in order and gives the single file's logits.
func TestMoEHFShardedExperts(t *testing.T) {
	spec := moeHFSpecs()["qwen2moe"]
	hf := filepath.Join(t.TempDir(), "hf")
	if err := modeltest.WriteHF(hf, spec, kernels.F32); err != nil {
		t.Fatal(err)
	}
	_, want := moeLogits(t, hf)
	single := filepath.Join(hf, "model.safetensors")
	raw, err := os.ReadFile(single)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := parseSafetensors(raw)
	if err != nil {
		t.Fatal(err)
	}
	var shards [2][]modeltest.Tensor
	files := [2]string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
	weightMap := map[string]string{}
	for _, name := range sortedKeys(entries) {
		e := entries[name]
		s := 0
		if _, expert, ok := hfExpertName(name); ok && expert%2 == 1 {
			s = 1
		}
		shards[s] = append(shards[s], modeltest.Tensor{Name: name, DType: stDTypes[e.dtype], Shape: e.shape, Data: raw[e.begin:e.end]})
		weightMap[name] = files[s]
	}
	for s := range shards {
		if err := modeltest.WriteSafetensors(filepath.Join(hf, files[s]), shards[s]); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := json.Marshal(map[string]any{"weight_map": weightMap})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hf, "model.safetensors.index.json"), idx, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(single); err != nil {
		t.Fatal(err)
	}
	_, got := moeLogits(t, hf)
	for s := range want {
		if !slices.Equal(got[s], want[s]) {
			t.Fatalf("call %d: logits from two shards differ from one file's", s)
		}
	}
}
