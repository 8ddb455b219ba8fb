package models

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// The small Gemma 4 models (E2B, E4B) add three things to gemma4.go's
// block, as llama.cpp's gemma4 reads and runs them:
//
//	per-layer inputs (embedding_length_per_layer_input = P > 0): each token
//	  has, for each layer l, a P-wide input
//	    in_l = (rmsnorm(x₀·W_l / √hidden) + E_l[tok]·√P) / √2
//	  where x₀ is the scaled embedding, W_l the rows lP…(l+1)P of
//	  per_layer_model_proj and E_l[tok] the l-th P-slice of the token's row
//	  of per_layer_token_embd; after its feed-forward, layer l adds
//	    rmsnorm((gelu(x·inp_gate_l) ⊙ in_l)·proj_l)
//	  to the residual stream (before the layer scale);
//	shared K/V (attention.shared_kv_layers = S): the last S layers compute
//	  no K/V of their own; a window layer among them reads the K/V of layer
//	  L−S−2, a global one of layer L−S−1 (llama.cpp's reuse callback, which
//	  takes those two to be a window and a global layer); they keep nothing
//	  in the KV stores;
//	per-layer feed-forward widths (feed_forward_length as an array:
//	  use_double_wide_mlp doubles the shared layers').
//
// A view of per_layer_token_embd as [vocab·L, P] rows makes E_l[tok] one
// GetRows of row tok·L + l, so the table is read where it lies (mmap'd on
// the CPU), a row slice per token and layer.

// KVSource is the layer whose K/V layer i attends over: i itself, or for a
// shared-K/V layer the last window or global layer before the shared ones.
func (c Config) KVSource(i int) int {
	if c.KVSharedFrom <= 0 || i < c.KVSharedFrom {
		return i
	}
	if c.IsWindowLayer(i) {
		return c.KVSharedFrom - 2
	}
	return c.KVSharedFrom - 1
}

// LayerFFNWidth is layer i's feed-forward width.
func (c Config) LayerFFNWidth(i int) int {
	if i < len(c.LayerFFN) {
		return c.LayerFFN[i]
	}
	return c.FFN
}

// gemma4Small reads the E2B/E4B keys: per-layer inputs, shared K/V and the
// per-layer feed-forward widths (cfg.FFN becomes the widest).
func (m *metaReader) gemma4Small(cfg *Config) error {
	g, path := m.g, m.g.path
	cfg.PerLayerEmbd = m.intOr("embedding_length_per_layer_input", 0)
	shared := m.intOr("attention.shared_kv_layers", 0)
	key := m.prefix + "feed_forward_length"
	if n, ok := g.Uint(key); ok {
		cfg.FFN = int(min(n, math.MaxInt32))
	} else if widths, ok := g.Int32s(key); ok && len(widths) == cfg.Layers {
		cfg.LayerFFN = make([]int, cfg.Layers)
		for i, w := range widths {
			if w <= 0 {
				return fmt.Errorf("gguf %s: %s[%d] = %d: %w", path, key, i, w, ErrMalformed)
			}
			cfg.LayerFFN[i], cfg.FFN = int(w), max(cfg.FFN, int(w))
		}
	} else if _, present := g.meta[key]; present {
		return fmt.Errorf("gguf %s: %s must be a number or one per layer (%d): %w", path, key, cfg.Layers, ErrMalformed)
	}
	if m.err != nil {
		return m.err
	}
	if shared > 0 {
		from := cfg.Layers - shared
		// llama.cpp's reuse: window layers read layer from−2, global ones from−1.
		if from < 2 || !cfg.WindowLayers[from-2] || cfg.WindowLayers[from-1] {
			return fmt.Errorf("gguf %s: %d shared-K/V layers of %d: the two before them must be a window and a global layer: %w", path, shared, cfg.Layers, ErrMalformed)
		}
		cfg.KVSharedFrom = from
	}
	return nil
}

// gemma4PLE are the per-layer inputs' weights and scratch.
type gemma4PLE struct {
	embd      kernels.Tensor   // per_layer_token_embd as [vocab·L, P]
	proj      []kernels.Tensor // [L] rows of per_layer_model_proj: [P, hidden]
	projNorm  kernels.Tensor   // [P]
	gate      []kernels.Tensor // [L] blk.l.inp_gate [P, hidden]
	out       []kernels.Tensor // [L] blk.l.proj [hidden, P]
	postNorm  []kernels.Tensor // [L] blk.l.post_norm [hidden]
	in        []kernels.Tensor // [L] scratch [rows, P]: each layer's input
	tmp, act  kernels.Tensor   // scratch [rows, P]
	rowIDs    []int32          // [rows] per_layer_token_embd view rows of one layer
	sqrtP     float32
	invSqrtH  float32
	invSqrtTw float32
}

// loadGemma4PLE loads the per-layer inputs' weights and allocates their
// scratch (c.PerLayerEmbd > 0).
func (m *Llama) loadGemma4PLE(w *weightLoader) (*gemma4PLE, error) {
	c, L, P := m.cfg, m.cfg.Layers, m.cfg.PerLayerEmbd
	rows := m.opts.MaxBatchTokens
	p := &gemma4PLE{sqrtP: float32(math.Sqrt(float64(P))), invSqrtH: float32(1 / math.Sqrt(float64(c.Hidden))), invSqrtTw: float32(1 / math.Sqrt2),
		rowIDs: make([]int32, rows)}
	embd, ok := w.get("per_layer_token_embd.weight", c.Vocab, L*P)
	proj, ok2 := w.get("per_layer_model_proj.weight", L*P, c.Hidden)
	if !ok || !ok2 {
		return nil, w.err
	}
	if P%embd.DType.BlockElems() != 0 || P%proj.DType.BlockElems() != 0 {
		return nil, fmt.Errorf("%s: per-layer input width %d is not a whole number of %v/%v blocks: %w", w.src.Path(), P, embd.DType, proj.DType, ErrUnsupported)
	}
	var err error
	upload := func(t kernels.HostTensor) kernels.Tensor {
		var up kernels.Tensor
		if err == nil {
			up, err = m.be.Upload(t)
		}
		return up
	}
	alloc := func(shape ...int) kernels.Tensor {
		var t kernels.Tensor
		if err == nil {
			t, err = m.be.Alloc(shape...)
		}
		return t
	}
	// Both tensors are row-major with P-wide runs per layer: the embedding
	// as L runs per token row, the projection as P whole rows per layer.
	p.embd = upload(kernels.HostTensor{Name: embd.Name, DType: embd.DType, Shape: []int{c.Vocab * L, P}, Data: embd.Data})
	per := proj.DType.RowBytes(c.Hidden) * P
	for l := range L {
		p.proj = append(p.proj, upload(kernels.HostTensor{Name: fmt.Sprintf("%s[%d]", proj.Name, l), DType: proj.DType,
			Shape: []int{P, c.Hidden}, Data: proj.Data[l*per : (l+1)*per]}))
		p.in = append(p.in, alloc(rows, P))
	}
	p.projNorm = w.loadF32("per_layer_proj_norm.weight", P)
	for l := range L {
		pre := fmt.Sprintf("blk.%d.", l)
		p.gate = append(p.gate, w.load(pre+"inp_gate.weight", P, c.Hidden))
		p.out = append(p.out, w.load(pre+"proj.weight", c.Hidden, P))
		p.postNorm = append(p.postNorm, w.loadF32(pre+"post_norm.weight", c.Hidden))
	}
	p.tmp, p.act = alloc(rows, P), alloc(rows, P)
	if err == nil {
		err = w.err
	}
	return p, err
}

// gemma4PLEInputs computes every layer's per-layer input from the scaled
// embeddings in m.x.
func (m *Llama) gemma4PLEInputs(b *kernels.Batch, n int) error {
	c, be, p, ops := &m.cfg, m.be, m.gemma4.ple, m.gemma.ops
	L := c.Layers
	var err error
	for l := range L {
		for r, tok := range b.Tokens[:n] {
			p.rowIDs[r] = tok*int32(L) + int32(l)
		}
		err = firstErr(err,
			be.MatMul(p.in[l], m.x, p.proj[l], nil, n),
			ops.Scale(p.in[l], n, p.invSqrtH),
			be.RMSNorm(p.in[l], p.in[l], p.projNorm, n, c.RMSEps),
			be.GetRows(p.tmp, p.embd, p.rowIDs[:n]),
			ops.Scale(p.tmp, n, p.sqrtP),
			be.Add(p.in[l], p.tmp, n),
			ops.Scale(p.in[l], n, p.invSqrtTw),
		)
	}
	return err
}

// gemma4PLELayer adds layer l's per-layer input to the residual stream.
func (m *Llama) gemma4PLELayer(l, n int) error {
	c, be, p := &m.cfg, m.be, m.gemma4.ple
	return firstErr(
		be.MatMul(p.act, m.x, p.gate[l], nil, n),
		m.gemma.ops.GeGLU(p.act, p.act, p.in[l], n),
		be.MatMul(m.o, p.act, p.out[l], nil, n),
		be.RMSNorm(m.o, m.o, p.postNorm[l], n, c.RMSEps),
		be.Add(m.x, m.o, n),
	)
}

// gemma4FFNScratch allocates gate and up scratch for every feed-forward
// width but the widest (m.gate and m.up, allocated after).
func (m *Llama) gemma4FFNScratch() (map[int][2]kernels.Tensor, error) {
	c, out := m.cfg, map[int][2]kernels.Tensor{}
	for _, f := range c.LayerFFN {
		if _, ok := out[f]; ok || f == c.FFN {
			continue
		}
		g, err := m.be.Alloc(m.opts.MaxBatchTokens, f)
		if err != nil {
			return nil, err
		}
		u, err := m.be.Alloc(m.opts.MaxBatchTokens, f)
		if err != nil {
			return nil, err
		}
		out[f] = [2]kernels.Tensor{g, u}
	}
	return out, nil
}
