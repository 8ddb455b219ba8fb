package models

import (
	"fmt"
	"math"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tokenizer/vocab"
)

// Keys lists the metadata keys in file order.
func (g *GGUFFile) Keys() []string { return g.keys }

// Meta returns a metadata value as decoded: scalars as their Go type (uint32,
// float32, string, bool, ...), arrays as typed slices, arrays of arrays as []any.
func (g *GGUFFile) Meta(key string) (any, bool) { v, ok := g.meta[key]; return v, ok }

// String returns a string value.
func (g *GGUFFile) String(key string) (string, bool) {
	s, ok := g.meta[key].(string)
	return s, ok
}

// Uint returns a non-negative integer value of any integer type.
func (g *GGUFFile) Uint(key string) (uint64, bool) { return asUint(g.meta[key]) }

// Int returns an integer value of any integer type that fits in int64.
func (g *GGUFFile) Int(key string) (int64, bool) { return asInt(g.meta[key]) }

// Float returns a float value, or an integer one converted.
func (g *GGUFFile) Float(key string) (float64, bool) {
	switch v := g.meta[key].(type) {
	case float32:
		return float64(v), true
	case float64:
		return v, true
	}
	if i, ok := asInt(g.meta[key]); ok {
		return float64(i), true
	}
	return 0, false
}

// Bool returns a bool value.
func (g *GGUFFile) Bool(key string) (bool, bool) {
	b, ok := g.meta[key].(bool)
	return b, ok
}

// Strings returns an array of strings.
func (g *GGUFFile) Strings(key string) ([]string, bool) {
	s, ok := g.meta[key].([]string)
	return s, ok
}

// Float32s returns an array of floats (float32 or float64 elements).
func (g *GGUFFile) Float32s(key string) ([]float32, bool) {
	switch v := g.meta[key].(type) {
	case []float32:
		return v, true
	case []float64:
		out := make([]float32, len(v))
		for i, f := range v {
			out[i] = float32(f)
		}
		return out, true
	}
	return nil, false
}

// Int32s returns an array of integers of any integer type whose values fit in int32.
func (g *GGUFFile) Int32s(key string) ([]int32, bool) {
	var out []int32
	conv := func(n int, at func(int) int64) bool {
		out = make([]int32, n)
		for i := range out {
			x := at(i)
			if x < math.MinInt32 || x > math.MaxInt32 {
				return false
			}
			out[i] = int32(x)
		}
		return true
	}
	var ok bool
	switch v := g.meta[key].(type) {
	case []int32:
		return v, true
	case []uint8:
		ok = conv(len(v), func(i int) int64 { return int64(v[i]) })
	case []int8:
		ok = conv(len(v), func(i int) int64 { return int64(v[i]) })
	case []uint16:
		ok = conv(len(v), func(i int) int64 { return int64(v[i]) })
	case []int16:
		ok = conv(len(v), func(i int) int64 { return int64(v[i]) })
	case []uint32:
		ok = conv(len(v), func(i int) int64 { return int64(v[i]) })
	case []int64:
		ok = conv(len(v), func(i int) int64 { return v[i] })
	case []uint64:
		ok = conv(len(v), func(i int) int64 { return int64(min(v[i], math.MaxInt64)) })
	}
	return out, ok
}

func asUint(v any) (uint64, bool) {
	if u, ok := v.(uint64); ok {
		return u, true
	}
	i, ok := asInt(v)
	return uint64(i), ok && i >= 0
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case int64:
		return x, true
	}
	return 0, false
}

// Config reads the architecture's shape from the <arch>.* keys.
func (g *GGUFFile) Config() (Config, error) {
	arch, ok := g.String("general.architecture")
	if !ok {
		return Config{}, fmt.Errorf("gguf %s: general.architecture: %w", g.path, ErrMissingKey)
	}
	cfg := Config{Arch: arch}
	switch arch {
	case "llama", "smollm3":
		cfg.RopeStyle = kernels.RoPEInterleaved // convert_hf_to_gguf permuted Q and K
	case "qwen2", "qwen3", "qwen3moe", "qwen2moe", "olmoe", "gemma2", "gemma3", "gemma4", "phi3", "gpt-oss":
		cfg.RopeStyle = kernels.RoPEHalves
	default:
		return Config{}, fmt.Errorf("gguf %s: architecture %q (want llama, qwen2, qwen3, qwen3moe, qwen2moe, olmoe, gemma2, gemma3, gemma4, phi3, smollm3 or gpt-oss): %w", g.path, arch, ErrUnsupported)
	}
	m := metaReader{g: g, prefix: arch + "."}
	cfg.Layers = m.int("block_count")
	cfg.Hidden = m.int("embedding_length")
	cfg.Heads = m.int("attention.head_count")
	cfg.ContextLen = m.int("context_length")
	cfg.RMSEps = m.float("attention.layer_norm_rms_epsilon")
	cfg.RopeTheta = m.floatOr("rope.freq_base", 10000)
	if cfg.Heads > 0 {
		cfg.HeadDim = m.intOr("attention.key_length", cfg.Hidden/cfg.Heads)
	}
	if m.err != nil {
		return Config{}, m.err
	}
	if arch == "gemma4" {
		// Arrays where the Llama family has numbers are read (or refused) there.
		if err := m.gemma4(&cfg); err != nil {
			return Config{}, err
		}
	} else {
		cfg.KVHeads = m.intOr("attention.head_count_kv", cfg.Heads)
	}
	if cfg.FFN == 0 { // gemma4 read it, per layer where the file says so
		cfg.FFN = m.int("feed_forward_length")
	}
	cfg.Vocab = m.intOr("vocab_size", 0)
	if m.err != nil {
		return Config{}, m.err
	}
	if cfg.Vocab == 0 {
		cfg.Vocab = g.vocabFallback()
	}
	scaling, err := m.ropeScaling(arch == "gpt-oss")
	if err != nil {
		return Config{}, err
	}
	cfg.RopeScaling = scaling
	cfg.TiedEmbeddings = !g.Has("output.weight")
	cfg.QKVBias = g.Has("blk.0.attn_q.bias")
	cfg.QKNorm = g.Has("blk.0.attn_q_norm.weight")
	cfg.Experts = m.intOr("expert_count", 0)
	if cfg.Experts > 0 {
		cfg.ExpertsUsed = m.int("expert_used_count")
		cfg.ExpertFFN = m.intOr("expert_feed_forward_length", cfg.FFN)
		// llama.cpp's build_moe_ffn for qwen3moe and llama (Mixtral) renormalises.
		cfg.ExpertNorm = true
	}
	if arch == "qwen2moe" || arch == "olmoe" {
		m.moeVariant(&cfg)
	}
	if arch == "gemma3" || arch == "gemma2" {
		if err := m.gemma3(&cfg); err != nil {
			return Config{}, err
		}
	}
	if arch == "smollm3" {
		m.smollm3(&cfg)
	}
	if arch == "gpt-oss" {
		if err := m.gptoss(&cfg); err != nil {
			return Config{}, err
		}
	}
	if arch == "phi3" {
		if err := m.phi3(&cfg); err != nil {
			return Config{}, err
		}
	}
	if err := checkShape(cfg); err != nil {
		return Config{}, fmt.Errorf("gguf %s: %w", g.path, err)
	}
	return cfg, nil
}

// vocabFallback finds the vocabulary size when <arch>.vocab_size is absent.
func (g *GGUFFile) vocabFallback() int {
	if toks, ok := g.Strings("tokenizer.ggml.tokens"); ok {
		return len(toks)
	}
	if i, ok := g.byName["token_embd.weight"]; ok {
		return g.tensors[i].Shape[0]
	}
	return 0
}

// metaReader reads required and optional <arch>.* keys, keeping the first error.
type metaReader struct {
	g      *GGUFFile
	prefix string
	err    error
}

func (m *metaReader) fail(key string, v any, ok bool) {
	if m.err != nil {
		return
	}
	if !ok {
		m.err = fmt.Errorf("gguf %s: %s: %w", m.g.path, m.prefix+key, ErrMissingKey)
		return
	}
	m.err = fmt.Errorf("gguf %s: %s = %v (%T) is out of range: %w", m.g.path, m.prefix+key, v, v, ErrMalformed)
}

func (m *metaReader) int(key string) int {
	v, present := m.g.meta[m.prefix+key]
	u, ok := asUint(v)
	if !ok || u > math.MaxInt32 {
		m.fail(key, v, present)
		return 0
	}
	return int(u)
}

func (m *metaReader) intOr(key string, def int) int {
	if _, ok := m.g.meta[m.prefix+key]; !ok {
		return def
	}
	return m.int(key)
}

func (m *metaReader) float(key string) float32 {
	v, present := m.g.meta[m.prefix+key]
	f, ok := m.g.Float(m.prefix + key)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		m.fail(key, v, present)
		return 0
	}
	return float32(f)
}

func (m *metaReader) floatOr(key string, def float32) float32 {
	if _, ok := m.g.meta[m.prefix+key]; !ok {
		return def
	}
	return m.float(key)
}

// ropeScaling reads <arch>.rope.scaling.*: Llama 3's scheme, linear, and
// YaRN where the architecture's forward pass applies its attention factor
// (gpt-oss); YaRN elsewhere is refused rather than silently ignored.
func (m *metaReader) ropeScaling(yarn bool) (*RopeScaling, error) {
	typ, _ := m.g.String(m.prefix + "rope.scaling.type")
	switch typ {
	case "", "none":
		return nil, nil
	case "yarn":
		if !yarn {
			return nil, fmt.Errorf("gguf %s: %srope.scaling.type yarn is read for gpt-oss only: %w", m.g.path, m.prefix, ErrUnsupported)
		}
		s := &RopeScaling{YaRN: true, Factor: m.float("rope.scaling.factor"),
			OriginalContext: m.intOr("rope.scaling.original_context_length", m.intOr("context_length", 0)),
			BetaFast:        m.floatOr("rope.scaling.yarn_beta_fast", 32), BetaSlow: m.floatOr("rope.scaling.yarn_beta_slow", 1)}
		for _, k := range []string{"rope.scaling.yarn_ext_factor", "rope.scaling.yarn_attn_factor", "rope.scaling.yarn_log_multiplier", "rope.scaling.attn_factor"} {
			if _, ok := m.g.meta[m.prefix+k]; ok {
				return nil, fmt.Errorf("gguf %s: %s%s (a YaRN variant other than gpt-oss's): %w", m.g.path, m.prefix, k, ErrUnsupported)
			}
		}
		if m.err == nil && (!(s.Factor >= 1) || s.OriginalContext <= 0 || !(s.BetaFast > 0) || !(s.BetaSlow > 0)) {
			return nil, fmt.Errorf("gguf %s: YaRN factor %g from %d tokens, betas %g/%g: %w", m.g.path, s.Factor, s.OriginalContext, s.BetaFast, s.BetaSlow, ErrMalformed)
		}
		return s, m.err
	case "llama3":
	case "linear":
		return &RopeScaling{Linear: true, Factor: m.float("rope.scaling.factor")}, m.err
	default:
		return nil, fmt.Errorf("gguf %s: %srope.scaling.type %q (want llama3, linear or none; yarn for gpt-oss): %w", m.g.path, m.prefix, typ, ErrUnsupported)
	}
	s := &RopeScaling{
		Factor:          m.float("rope.scaling.factor"),
		LowFreqFactor:   m.floatOr("rope.scaling.low_freq_factor", 1),
		HighFreqFactor:  m.floatOr("rope.scaling.high_freq_factor", 4),
		OriginalContext: m.int("rope.scaling.original_context_length"),
	}
	return s, m.err
}

// check rejects shapes no forward pass could run, so a hostile file fails at
// open instead of inside a kernel.
func checkShape(c Config) error {
	switch {
	case c.Layers <= 0, c.Hidden <= 0, c.FFN <= 0, c.Heads <= 0, c.KVHeads <= 0, c.HeadDim <= 0, c.Vocab <= 0:
		return fmt.Errorf("config %+v has a zero dimension: %w", c, ErrMalformed)
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("config: %d heads not a multiple of %d KV heads: %w", c.Heads, c.KVHeads, ErrMalformed)
	case c.HeadDim%2 != 0:
		return fmt.Errorf("config: odd head dim %d cannot be rotated: %w", c.HeadDim, ErrMalformed)
	case c.Experts < 0 || c.Experts > 0 && (c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts || c.ExpertFFN <= 0):
		return fmt.Errorf("config: %d experts, %d used, expert FFN %d: %w", c.Experts, c.ExpertsUsed, c.ExpertFFN, ErrMalformed)
	case c.RMSEps <= 0 || c.RopeTheta <= 0:
		return fmt.Errorf("config: eps %g and rope theta %g must be positive: %w", c.RMSEps, c.RopeTheta, ErrMalformed)
	}
	return nil
}

// Vocab reads the tokenizer.ggml.* keys and tokenizer.chat_template.
func (g *GGUFFile) Vocab() (*vocab.Vocab, error) {
	model, ok := g.String("tokenizer.ggml.model")
	if !ok {
		return nil, fmt.Errorf("gguf %s: tokenizer.ggml.model: %w", g.path, ErrMissingKey)
	}
	tokens, ok := g.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("gguf %s: tokenizer.ggml.tokens: %w", g.path, ErrMissingKey)
	}
	v := &vocab.Vocab{Model: model, Tokens: tokens}
	v.Pre, _ = g.String("tokenizer.ggml.pre")
	v.ChatTemplate, _ = g.String("tokenizer.chat_template")
	var err error
	if v.Scores, err = optionalArray(g, "tokenizer.ggml.scores", len(tokens), g.Float32s); err != nil {
		return nil, err
	}
	if v.TokenTypes, err = optionalArray(g, "tokenizer.ggml.token_type", len(tokens), g.Int32s); err != nil {
		return nil, err
	}
	if _, present := g.meta["tokenizer.ggml.merges"]; present {
		if v.Merges, ok = g.Strings("tokenizer.ggml.merges"); !ok {
			return nil, fmt.Errorf("gguf %s: tokenizer.ggml.merges is not a string array: %w", g.path, ErrMalformed)
		}
	}
	ids := []struct {
		key string
		dst *int32
	}{
		{"bos_token_id", &v.BOS}, {"eos_token_id", &v.EOS}, {"eot_token_id", &v.EOT},
		{"eom_token_id", &v.EOM}, {"unknown_token_id", &v.Unknown}, {"padding_token_id", &v.Pad},
	}
	for _, id := range ids {
		*id.dst = -1
		key := "tokenizer.ggml." + id.key
		raw, present := g.meta[key]
		if !present {
			continue
		}
		n, ok := asInt(raw)
		if !ok || n < 0 || n >= int64(len(tokens)) {
			return nil, fmt.Errorf("gguf %s: %s = %v is not a token id (vocabulary of %d): %w", g.path, key, raw, len(tokens), ErrMalformed)
		}
		*id.dst = int32(n)
	}
	v.AddBOS = g.boolOr("tokenizer.ggml.add_bos_token", false)
	v.AddEOS = g.boolOr("tokenizer.ggml.add_eos_token", false)
	// llama.cpp's default: SentencePiece vocabularies prefix a space, BPE ones do not.
	v.AddSpacePrefix = g.boolOr("tokenizer.ggml.add_space_prefix", strings.EqualFold(model, "llama"))
	return v, nil
}

func (g *GGUFFile) boolOr(key string, def bool) bool {
	if b, ok := g.Bool(key); ok {
		return b
	}
	return def
}

// optionalArray reads a per-token array: absent is nil, present must have one
// entry per token.
func optionalArray[T any](g *GGUFFile, key string, n int, get func(string) ([]T, bool)) ([]T, error) {
	if _, present := g.meta[key]; !present {
		return nil, nil
	}
	a, ok := get(key)
	if !ok || len(a) != n {
		return nil, fmt.Errorf("gguf %s: %s must be a numeric array with one entry per token (%d): %w", g.path, key, n, ErrMalformed)
	}
	return a, nil
}
