//go:build cuda || cudaemu

package modeltest

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/tokenizer"
)

// randomSource is a models.WeightSource whose tensors are random: matrices in
// dtype, norms near 1. Tensors of one shape and role share their values
// across layers when shared is set (the 8B benchmark: 16 GB generated once
// per shape instead of per tensor; every layer still gets its own upload).
type randomSource struct {
	cfg    models.Config
	dtype  kernels.DType
	shared bool
	cache  map[string][]byte
}

func newRandomSource(cfg models.Config, dt kernels.DType, shared bool) *randomSource {
	return &randomSource{cfg: cfg, dtype: dt, shared: shared, cache: map[string][]byte{}}
}

// smolLM2 is SmolLM2-135M's shape.
func smolLM2() models.Config {
	return models.Config{Arch: "llama", Layers: 30, Hidden: 576, FFN: 1536, Heads: 9, KVHeads: 3, HeadDim: 64,
		Vocab: 49152, ContextLen: 2048, RMSEps: 1e-5, RopeTheta: 100000, RopeStyle: kernels.RoPEHalves, TiedEmbeddings: true}
}

// llama3_8B is Meta-Llama-3-8B's shape.
func llama3_8B() models.Config {
	return models.Config{Arch: "llama", Layers: 32, Hidden: 4096, FFN: 14336, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 128256, ContextLen: 8192, RMSEps: 1e-5, RopeTheta: 500000, RopeStyle: kernels.RoPEHalves,
		RopeScaling: &models.RopeScaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}}
}

func (s *randomSource) Config() (models.Config, error)   { return s.cfg, nil }
func (s *randomSource) Vocab() (*tokenizer.Vocab, error) { return nil, nil }
func (s *randomSource) Path() string                     { return "random:" + s.dtype.String() }
func (s *randomSource) Close() error                     { s.cache = nil; return nil }
func (s *randomSource) Has(name string) bool             { _, err := s.shape(name); return err == nil }
func (s *randomSource) shape(name string) ([]int, error) {
	c := s.cfg
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	role := name
	if strings.HasPrefix(name, "blk.") {
		role = name[strings.Index(name[4:], ".")+5:]
	}
	switch role {
	case "token_embd.weight":
		return []int{c.Vocab, c.Hidden}, nil
	case "output.weight":
		if c.TiedEmbeddings {
			break
		}
		return []int{c.Vocab, c.Hidden}, nil
	case "output_norm.weight", "attn_norm.weight", "ffn_norm.weight":
		return []int{c.Hidden}, nil
	case "attn_q.weight":
		return []int{q, c.Hidden}, nil
	case "attn_k.weight", "attn_v.weight":
		return []int{kv, c.Hidden}, nil
	case "attn_output.weight":
		return []int{c.Hidden, q}, nil
	case "ffn_gate.weight", "ffn_up.weight":
		return []int{c.FFN, c.Hidden}, nil
	case "ffn_down.weight":
		return []int{c.Hidden, c.FFN}, nil
	}
	return nil, fmt.Errorf("random source: %w: %s", models.ErrNoTensor, name)
}

func (s *randomSource) Tensor(name string) (kernels.HostTensor, error) {
	shape, err := s.shape(name)
	if err != nil {
		return kernels.HostTensor{}, err
	}
	dt, scale, norm := s.dtype, float32(0.02), len(shape) == 1
	if norm {
		dt = kernels.F32
	}
	key := name
	if s.shared && strings.HasPrefix(name, "blk.") {
		key = name[strings.Index(name[4:], ".")+5:]
	}
	if s.shared && name == "output.weight" {
		key = "token_embd.weight"
	}
	if data, ok := s.cache[key]; ok {
		return kernels.HostTensor{Name: name, DType: dt, Shape: shape, Data: data}, nil
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	n := 1
	for _, d := range shape {
		n *= d
	}
	vals := make([]float32, n)
	for i := range vals {
		if norm {
			vals[i] = 1 + 0.1*float32(r.NormFloat64())
		} else {
			vals[i] = scale * (2*r.Float32() - 1) * 1.7
		}
	}
	data, err := quant.Quantize(dt, vals)
	if err != nil {
		return kernels.HostTensor{}, err
	}
	s.cache[key] = data
	return kernels.HostTensor{Name: name, DType: dt, Shape: shape, Data: data}, nil
}
