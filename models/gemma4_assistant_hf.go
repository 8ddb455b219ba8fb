package models

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/kernels"
)

// A Gemma 4 assistant from a Hugging Face checkpoint
// (Gemma4AssistantForCausalLM): config.json nests the text model's
// Gemma4TextConfig in text_config beside backbone_hidden_size; the tensors
// are the text model's (model.*, every layer K/V-shared, so no k/v
// projections) and pre_projection / post_projection at the top, which
// this file exposes under llama.cpp's GGUF names so that one loader reads
// both. The global layers' proportional RoPE comes from rope_parameters as
// for a Gemma 4 checkpoint (gemma4RopeFreqs). The masked embedder of
// use_ordered_embeddings (centroids and a token ordering that restrict the
// logits to the top clusters) is not run: llama.cpp's converter drops it
// and computes every logit, and so does this forward.

// hfAssistantArch is the checkpoint's architectures[0].
const hfAssistantArch = "Gemma4AssistantForCausalLM"

// hfAssistant is an assistant checkpoint as the loader reads it: HFDir's
// tensors with the two projections under their GGUF names.
type hfAssistant struct{ *HFDir }

var hfAssistantNames = map[string]string{
	"nextn.pre_projection.weight":  "pre_projection.weight",
	"nextn.post_projection.weight": "post_projection.weight",
}

func (h hfAssistant) Tensor(name string) (kernels.HostTensor, error) {
	if n, ok := hfAssistantNames[name]; ok {
		t, err := h.HFDir.Tensor(n)
		t.Name = name
		return t, err
	}
	return h.HFDir.Tensor(name)
}

func (h hfAssistant) Has(name string) bool {
	if n, ok := hfAssistantNames[name]; ok {
		name = n
	}
	return h.HFDir.Has(name)
}

// gemma4AssistantHFConfig reads an assistant checkpoint's config.json and
// exposes its RoPE divisors (rope_freqs.weight).
func gemma4AssistantHFConfig(h *HFDir) (Gemma4AssistantConfig, error) {
	path := filepath.Join(h.dir, "config.json")
	var c Gemma4AssistantConfig
	fail := func(sentinel error, format string, args ...any) (Gemma4AssistantConfig, error) {
		return c, fmt.Errorf("hf config %s: Gemma 4 assistant: %s: %w", path, fmt.Sprintf(format, args...), sentinel)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("hf config %s: %w", path, err)
	}
	top := struct {
		TextConfig         json.RawMessage `json:"text_config"`
		BackboneHiddenSize int             `json:"backbone_hidden_size"`
		TieWordEmbeddings  *bool           `json:"tie_word_embeddings"`
	}{BackboneHiddenSize: 1536} // Gemma4AssistantConfig's default
	if err := json.Unmarshal(raw, &top); err != nil {
		return fail(ErrMalformed, "%v", err)
	}
	if top.TextConfig == nil {
		return fail(ErrMalformed, "no text_config")
	}
	hc := gemma4TextDefaults()
	x := hfGemma4Extra{GlobalHeadDim: 512, HiddenSizePerLayerInput: 256}
	if err := json.Unmarshal(top.TextConfig, &hc); err != nil {
		return fail(ErrMalformed, "text_config: %v", err)
	}
	if err := json.Unmarshal(top.TextConfig, &x); err != nil {
		return fail(ErrMalformed, "text_config: %v", err)
	}
	// transformers' Gemma4AssistantConfig.validate_architecture, and what
	// the forward pass has fixed.
	switch {
	case x.HiddenSizePerLayerInput != 0 || x.EnableMoEBlock || x.UseDoubleWideMLP:
		return fail(ErrUnsupported, "per-layer inputs %d, MoE %v, double-wide MLP %v (an assistant has none)", x.HiddenSizePerLayerInput, x.EnableMoEBlock, x.UseDoubleWideMLP)
	case hc.HiddenActivation != "gelu_pytorch_tanh":
		return fail(ErrUnsupported, "hidden_activation %q (Gemma's feed-forward is gelu_pytorch_tanh)", hc.HiddenActivation)
	case x.AttentionBias:
		return fail(ErrUnsupported, "attention_bias true")
	case top.TieWordEmbeddings != nil && !*top.TieWordEmbeddings:
		return fail(ErrUnsupported, "tie_word_embeddings false (the logits are the embedding's)")
	case hc.SlidingWindow == nil || *hc.SlidingWindow < 2:
		return fail(ErrMalformed, "sliding_window %v", hc.SlidingWindow)
	}
	c = Gemma4AssistantConfig{Hidden: hc.HiddenSize, Backbone: top.BackboneHiddenSize, Layers: hc.NumHiddenLayers,
		Heads: hc.NumAttentionHeads, HeadDim: x.GlobalHeadDim, HeadDimSWA: hc.HeadDim, Vocab: hc.VocabSize,
		Window: *hc.SlidingWindow, RMSEps: 1e-6, RopeTheta: 1e6, RopeSWA: gemma4RopeThetaLocal}
	if hc.RMSNormEps != nil {
		c.RMSEps = float32(*hc.RMSNormEps)
	}
	if c.Layers <= 0 || c.Heads <= 0 || c.Hidden <= 0 || c.HeadDimSWA <= 0 || c.HeadDimSWA%2 != 0 || c.HeadDim%2 != 0 || c.Backbone == c.Hidden {
		return fail(ErrMalformed, "%d layers, %d heads of %d/%d, width %d for a target of %d", c.Layers, c.Heads, c.HeadDim, c.HeadDimSWA, c.Hidden, c.Backbone)
	}
	c.WindowLyr = make([]bool, c.Layers)
	if hc.LayerTypes != nil {
		if len(hc.LayerTypes) != c.Layers {
			return fail(ErrMalformed, "%d layer_types for %d layers", len(hc.LayerTypes), c.Layers)
		}
		for i, t := range hc.LayerTypes {
			if t != "sliding_attention" && t != "full_attention" {
				return fail(ErrMalformed, "layer_types[%d] = %q", i, t)
			}
			c.WindowLyr[i] = t == "sliding_attention"
		}
	} else {
		setWindowPattern(c.WindowLyr, 6)
	}
	c.WindowLyr[c.Layers-1] = false // transformers forces the last layer global
	kvSWA, kvFull := hc.NumKeyValueHeads, hc.NumKeyValueHeads
	if x.AttentionKEqV && x.NumGlobalKeyValueHeads != nil {
		kvFull = *x.NumGlobalKeyValueHeads
	}
	c.FFN, c.KVHeads = make([]int, c.Layers), make([]int, c.Layers)
	for i, w := range c.WindowLyr {
		c.FFN[i], c.KVHeads[i] = hc.IntermediateSize, kvFull
		if w {
			c.KVHeads[i] = kvSWA
		}
	}
	for kind, p := range x.RopeParameters {
		switch {
		case kind != "sliding_attention" && kind != "full_attention":
			return fail(ErrUnsupported, "rope_parameters.%s", kind)
		case p.RopeTheta == nil || !(*p.RopeTheta > 0):
			return fail(ErrMalformed, "rope_parameters.%s.rope_theta %v", kind, p.RopeTheta)
		case p.Factor != nil && *p.Factor != 1:
			return fail(ErrUnsupported, "rope_parameters.%s.factor %g", kind, *p.Factor)
		case kind == "sliding_attention" && p.RopeType != "default" && p.RopeType != "":
			return fail(ErrUnsupported, "rope_parameters.sliding_attention.rope_type %q (want default)", p.RopeType)
		case kind == "full_attention" && p.RopeType != "default" && p.RopeType != "" && p.RopeType != "proportional":
			return fail(ErrUnsupported, "rope_parameters.full_attention.rope_type %q (want proportional or default)", p.RopeType)
		}
		if kind == "sliding_attention" {
			c.RopeSWA = float32(*p.RopeTheta)
		} else {
			c.RopeTheta = float32(*p.RopeTheta)
		}
	}
	if !h.Has("rope_freqs.weight") {
		if err := h.gemma4RopeFreqs(); err != nil {
			return c, err
		}
	}
	return c, nil
}
