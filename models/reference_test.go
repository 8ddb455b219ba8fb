package models

import (
	"fmt"
	"math"
	"sort"

	"github.com/sluicehq/sluice/kernels/quant"
)

// refLlama is a plain float64 Llama forward over unpermuted (Hugging Face
// layout) weights, written from the paper's equations with nothing shared with
// the backend: the yardstick the loaders and kernels are checked against.
type refLlama struct {
	c Config
	w map[string][]float32 // GGUF tensor names, HF element order
	k [][][]float64        // [layer][pos] → kvHeads*hd
	v [][][]float64
}

func newRefLlama(c Config, w map[string][]float32) *refLlama {
	return &refLlama{c: c, w: w, k: make([][][]float64, c.Layers), v: make([][][]float64, c.Layers)}
}

func (r *refLlama) mat(name string, x []float64, out int) []float64 {
	w := r.w[name]
	in := len(x)
	y := make([]float64, out)
	for o := range out {
		var s float64
		for i := range in {
			s += float64(w[o*in+i]) * x[i]
		}
		y[o] = s
	}
	if b, ok := r.w[name[:len(name)-len("weight")]+"bias"]; ok {
		for o := range y {
			y[o] += float64(b[o])
		}
	}
	return y
}

func (r *refLlama) norm(name string, x []float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+float64(r.c.RMSEps))
	w := r.w[name]
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * s * float64(w[i])
	}
	return y
}

// rope rotates pairs (i, i+d/2) of each head: the Hugging Face convention.
func (r *refLlama) rope(x []float64, heads, pos int, freqs []float32) {
	hd := r.c.HeadDim
	for h := range heads {
		for i := range hd / 2 {
			a, b := h*hd+i, h*hd+i+hd/2
			s, c := math.Sincos(float64(pos) * float64(freqs[i]))
			x[a], x[b] = x[a]*c-x[b]*s, x[a]*s+x[b]*c
		}
	}
}

func halfRound(x []float64) {
	for i, v := range x {
		x[i] = float64(quant.F16ToF32(quant.F32ToF16(float32(v))))
	}
}

// step feeds one token and returns the logits after it.
func (r *refLlama) step(tok int32) []float64 {
	c := r.c
	pos := len(r.k[0])
	freqs := ropeFrequencies(c)
	emb := r.w["token_embd.weight"][int(tok)*c.Hidden : int(tok+1)*c.Hidden]
	x := make([]float64, c.Hidden)
	for i, v := range emb {
		x[i] = float64(v)
	}
	hd, group := c.HeadDim, c.Heads/c.KVHeads
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		h := r.norm(p+"attn_norm.weight", x)
		q := r.mat(p+"attn_q.weight", h, c.Heads*hd)
		k := r.mat(p+"attn_k.weight", h, c.KVHeads*hd)
		v := r.mat(p+"attn_v.weight", h, c.KVHeads*hd)
		if qn, ok := r.w[p+"attn_q_norm.weight"]; ok && len(qn) == len(q) && c.Heads > 1 { // OLMoE's, over the whole projection
			q, k = r.norm(p+"attn_q_norm.weight", q), r.norm(p+"attn_k_norm.weight", k)
		} else if ok { // Qwen3's QK-norm, head by head
			for hh := range c.Heads {
				copy(q[hh*hd:(hh+1)*hd], r.norm(p+"attn_q_norm.weight", q[hh*hd:(hh+1)*hd]))
			}
			for hh := range c.KVHeads {
				copy(k[hh*hd:(hh+1)*hd], r.norm(p+"attn_k_norm.weight", k[hh*hd:(hh+1)*hd]))
			}
		}
		r.rope(q, c.Heads, pos, freqs)
		r.rope(k, c.KVHeads, pos, freqs)
		halfRound(k) // the KV cache stores F16: the reference keeps what it keeps
		halfRound(v)
		r.k[l] = append(r.k[l], k)
		r.v[l] = append(r.v[l], v)
		att := make([]float64, c.Heads*hd)
		for hh := range c.Heads {
			kv := (hh / group) * hd
			scores := make([]float64, pos+1)
			mx := math.Inf(-1)
			for t := range pos + 1 {
				var s float64
				for i := range hd {
					s += q[hh*hd+i] * r.k[l][t][kv+i]
				}
				scores[t] = s / math.Sqrt(float64(hd))
				mx = math.Max(mx, scores[t])
			}
			var sum float64
			for t := range scores {
				scores[t] = math.Exp(scores[t] - mx)
				sum += scores[t]
			}
			for t := range scores {
				for i := range hd {
					att[hh*hd+i] += scores[t] / sum * r.v[l][t][kv+i]
				}
			}
		}
		o := r.mat(p+"attn_output.weight", att, c.Hidden)
		for i := range x {
			x[i] += o[i]
		}
		h = r.norm(p+"ffn_norm.weight", x)
		if c.Experts > 0 {
			o = r.moe(p, h)
		} else {
			o = r.swiglu(p+"ffn_gate.weight", p+"ffn_up.weight", p+"ffn_down.weight", 0, h, c.FFN)
		}
		for i := range x {
			x[i] += o[i]
		}
	}
	x = r.norm("output_norm.weight", x)
	head := "output.weight"
	if _, ok := r.w[head]; !ok {
		head = "token_embd.weight"
	}
	return r.mat(head, x, c.Vocab)
}

// swiglu is down(silu(gate·h) ⊙ up·h) with the matrices taken from row
// offset off·ffn (gate, up) and off·hidden (down) of the named tensors: an
// expert's slice of [experts, …] weights, or the whole of a dense FFN's.
func (r *refLlama) swiglu(gate, up, down string, off int, h []float64, ffn int) []float64 {
	hidden := len(h)
	dot := func(w []float32, x []float64) float64 {
		var s float64
		for i, v := range x {
			s += float64(w[i]) * v
		}
		return s
	}
	g := make([]float64, ffn)
	for j := range g {
		a := dot(r.w[gate][(off*ffn+j)*hidden:], h)
		b := dot(r.w[up][(off*ffn+j)*hidden:], h)
		g[j] = a / (1 + math.Exp(-a)) * b
	}
	o := make([]float64, hidden)
	for j := range o {
		o[j] = dot(r.w[down][(off*hidden+j)*ffn:], g)
	}
	return o
}

// moe routes h as Mixtral, Qwen3-MoE, Qwen2-MoE and OLMoE define it: softmax
// over the experts, the top k (ties to the lower index), weights
// renormalised over those k when ExpertNorm; and Qwen2-MoE's shared expert,
// scaled by the sigmoid of its own gate logit, added for every row.
func (r *refLlama) moe(p string, h []float64) []float64 {
	c := r.c
	logits := r.mat(p+"ffn_gate_inp.weight", h, c.Experts)
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, v)
	}
	probs := make([]float64, len(logits))
	var sum float64
	for e, v := range logits {
		probs[e] = math.Exp(v - mx)
		sum += probs[e]
	}
	order := make([]int, len(probs))
	for e := range order {
		order[e] = e
	}
	sort.SliceStable(order, func(a, b int) bool { return probs[order[a]] > probs[order[b]] })
	top := order[:c.ExpertsUsed]
	div := sum
	if c.ExpertNorm {
		div = 0
		for _, e := range top {
			div += probs[e]
		}
	}
	out := make([]float64, len(h))
	for _, e := range top {
		o := r.swiglu(p+"ffn_gate_exps.weight", p+"ffn_up_exps.weight", p+"ffn_down_exps.weight", e, h, c.ExpertFFN)
		for i := range out {
			out[i] += probs[e] / div * o[i]
		}
	}
	if wg, ok := r.w[p+"ffn_gate_inp_shexp.weight"]; ok {
		var logit float64
		for i, v := range h {
			logit += float64(wg[i]) * v
		}
		g := 1 / (1 + math.Exp(-logit))
		o := r.swiglu(p+"ffn_gate_shexp.weight", p+"ffn_up_shexp.weight", p+"ffn_down_shexp.weight", 0, h, len(r.w[p+"ffn_gate_shexp.weight"])/len(h))
		for i := range out {
			out[i] += g * o[i]
		}
	}
	return out
}
