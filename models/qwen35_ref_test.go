package models

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models/modeltest"
)

// qwen35Ref is a float64 Qwen3.5 forward pass over one whole sequence,
// written straight from llama.cpp v0.5.0's qwen35.cpp and ggml's
// gated_delta_net, ssm_conv and rope (NeoX, partial) — independent of the
// model code it checks. K and V are rounded to F16 as the CPU KV cache
// stores them. It returns the logits of every position.
func qwen35Ref(s modeltest.Qwen35Spec, w map[string][]float32, toks []int32) [][]float64 {
	s = s.WithDefaults()
	T, H := len(toks), s.Hidden
	x := make([][]float64, T)
	for t, tok := range toks {
		x[t] = f64(w["token_embd.weight"][int(tok)*H : int(tok+1)*H])
	}
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		h := make([][]float64, T)
		for t := range T {
			h[t] = refRMSNorm(x[t], w[p+"attn_norm.weight"], float64(s.RMSEps))
		}
		var mix [][]float64
		if s.Recurrent(l) {
			mix = refDeltaNet(s, w, p, h)
		} else {
			mix = refGatedAttention(s, w, p, h)
		}
		for t := range T {
			for i := range H {
				x[t][i] += mix[t][i]
			}
			hn := refRMSNorm(x[t], w[p+"post_attention_norm.weight"], float64(s.RMSEps))
			g := refMatVec(w[p+"ffn_gate.weight"], hn)
			u := refMatVec(w[p+"ffn_up.weight"], hn)
			for i := range g {
				g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
			}
			d := refMatVec(w[p+"ffn_down.weight"], g)
			for i := range H {
				x[t][i] += d[i]
			}
		}
	}
	out := w["output.weight"]
	if s.Tied {
		out = w["token_embd.weight"]
	}
	logits := make([][]float64, T)
	for t := range T {
		logits[t] = refMatVec(out, refRMSNorm(x[t], w["output_norm.weight"], float64(s.RMSEps)))
	}
	return logits
}

func refDeltaNet(s modeltest.Qwen35Spec, w map[string][]float32, p string, h [][]float64) [][]float64 {
	T, S, K := len(h), s.StateSize, s.ConvKernel
	ch := (2*s.KHeads + s.VHeads) * S
	qkv := make([][]float64, T)
	for t := range T {
		qkv[t] = refMatVec(w[p+"attn_qkv.weight"], h[t])
	}
	conv := w[p+"ssm_conv1d.weight"] // [ch, K]
	y := make([][]float64, T)
	for t := range T {
		y[t] = make([]float64, ch)
		for c := range ch {
			var sum float64
			for i := range K {
				if src := t - (K - 1) + i; src >= 0 {
					sum += qkv[src][c] * float64(conv[c*K+i])
				}
			}
			y[t][c] = sum / (1 + math.Exp(-sum))
		}
	}
	eps := float64(s.RMSEps)
	l2 := func(v []float64) {
		var ss float64
		for _, e := range v {
			ss += e * e
		}
		for i := range v {
			v[i] /= math.Sqrt(ss + eps)
		}
	}
	state := make([][]float64, s.VHeads) // S_h[i*S+j]: key i, value j
	for hh := range state {
		state[hh] = make([]float64, S*S)
	}
	out := make([][]float64, T)
	for t := range T {
		for kh := range 2 * s.KHeads {
			l2(y[t][kh*S : (kh+1)*S])
		}
		z := refMatVec(w[p+"attn_gate.weight"], h[t])
		beta := refMatVec(w[p+"ssm_beta.weight"], h[t])
		alpha := refMatVec(w[p+"ssm_alpha.weight"], h[t])
		o := make([]float64, s.VHeads*S)
		for hh := range s.VHeads {
			kh := hh % s.KHeads
			q, k := y[t][kh*S:(kh+1)*S], y[t][(s.KHeads+kh)*S:(s.KHeads+kh+1)*S]
			v := y[t][(2*s.KHeads+hh)*S : (2*s.KHeads+hh+1)*S]
			b := 1 / (1 + math.Exp(-beta[hh]))
			a := alpha[hh] + float64(w[p+"ssm_dt.bias"][hh])
			sp := a
			if a <= 20 {
				sp = math.Log1p(math.Exp(a))
			}
			decay := math.Exp(sp * float64(w[p+"ssm_a"][hh]))
			st := state[hh]
			for i := range st {
				st[i] *= decay
			}
			for j := range S {
				var mem float64
				for i := range S {
					mem += st[i*S+j] * k[i]
				}
				d := (v[j] - mem) * b
				for i := range S {
					st[i*S+j] += k[i] * d
				}
			}
			oh := o[hh*S : (hh+1)*S]
			for j := range S {
				for i := range S {
					oh[j] += st[i*S+j] * q[i]
				}
				oh[j] /= math.Sqrt(float64(S))
			}
			copy(oh, refRMSNorm(oh, w[p+"ssm_norm.weight"], eps))
			for j := range S {
				zz := z[hh*S+j]
				oh[j] *= zz / (1 + math.Exp(-zz))
			}
		}
		out[t] = refMatVec(w[p+"ssm_out.weight"], o)
	}
	return out
}

func refGatedAttention(s modeltest.Qwen35Spec, w map[string][]float32, p string, h [][]float64) [][]float64 {
	T, hd, r := len(h), s.HeadDim, s.RopeDims
	eps := float64(s.RMSEps)
	q := make([][]float64, T)
	gate := make([][]float64, T)
	k := make([][]float64, T)
	v := make([][]float64, T)
	rope := func(vec []float64, pos int) {
		for i := range r / 2 {
			th := float64(pos) * math.Pow(float64(s.RopeTheta), -2*float64(i)/float64(r))
			c, sn := math.Cos(th), math.Sin(th)
			a, b := vec[i], vec[i+r/2]
			vec[i], vec[i+r/2] = a*c-b*sn, a*sn+b*c
		}
	}
	f16 := func(x float64) float64 { return float64(quant.F16ToF32(quant.F32ToF16(float32(x)))) }
	for t := range T {
		qg := refMatVec(w[p+"attn_q.weight"], h[t])
		q[t], gate[t] = make([]float64, s.Heads*hd), make([]float64, s.Heads*hd)
		for hh := range s.Heads {
			copy(q[t][hh*hd:], qg[2*hh*hd:(2*hh+1)*hd])
			copy(gate[t][hh*hd:], qg[(2*hh+1)*hd:(2*hh+2)*hd])
			copy(q[t][hh*hd:(hh+1)*hd], refRMSNorm(q[t][hh*hd:(hh+1)*hd], w[p+"attn_q_norm.weight"], eps))
			rope(q[t][hh*hd:(hh+1)*hd], t)
		}
		k[t], v[t] = refMatVec(w[p+"attn_k.weight"], h[t]), refMatVec(w[p+"attn_v.weight"], h[t])
		for hh := range s.KVHeads {
			copy(k[t][hh*hd:(hh+1)*hd], refRMSNorm(k[t][hh*hd:(hh+1)*hd], w[p+"attn_k_norm.weight"], eps))
			rope(k[t][hh*hd:(hh+1)*hd], t)
		}
		for i := range k[t] {
			k[t][i], v[t][i] = f16(k[t][i]), f16(v[t][i])
		}
	}
	out := make([][]float64, T)
	group := s.Heads / s.KVHeads
	for t := range T {
		att := make([]float64, s.Heads*hd)
		for hh := range s.Heads {
			kv := hh / group
			sc := make([]float64, t+1)
			mx := math.Inf(-1)
			for u := range t + 1 {
				for i := range hd {
					sc[u] += q[t][hh*hd+i] * k[u][kv*hd+i]
				}
				sc[u] /= math.Sqrt(float64(hd))
				mx = max(mx, sc[u])
			}
			var sum float64
			for u := range sc {
				sc[u] = math.Exp(sc[u] - mx)
				sum += sc[u]
			}
			for u := range sc {
				for i := range hd {
					att[hh*hd+i] += sc[u] / sum * v[u][kv*hd+i]
				}
			}
		}
		for i := range att {
			att[i] *= 1 / (1 + math.Exp(-gate[t][i]))
		}
		out[t] = refMatVec(w[p+"attn_output.weight"], att)
	}
	return out
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func refRMSNorm(x []float64, w []float32, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * float64(w[i])
	}
	return out
}

// refMatVec: w [rows, len(x)] row-major times x.
func refMatVec(w []float32, x []float64) []float64 {
	n := len(x)
	out := make([]float64, len(w)/n)
	for o := range out {
		var s float64
		for i, v := range x {
			s += float64(w[o*n+i]) * v
		}
		out[o] = s
	}
	return out
}
