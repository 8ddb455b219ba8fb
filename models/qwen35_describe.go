package models

import "fmt"

// DescribeQwen35 is what `sluice inspect` shows of a hybrid model beyond
// Describe's shape lines: which layers are which, the DeltaNet geometry and
// the memory one sequence holds besides its KV.
func DescribeQwen35(c Qwen35Config) []Fact {
	var f []Fact
	add := func(k, format string, args ...any) { f = append(f, Fact{k, fmt.Sprintf(format, args...)}) }
	full := make([]bool, c.Layers)
	for i, r := range c.Recurrent {
		full[i] = !r
	}
	dn := c.DeltaNet
	add("layers", "%d Gated DeltaNet, %d full attention (%s)", c.recurrentLayers, c.attnLayers, layerList(full))
	add("attention", "%d heads of %d (kv %d), sigmoid output gate, QK-norm, rotary over %d of %d (NeoX, base %g)",
		c.Heads, c.HeadDim, c.KVHeads, c.RopeDims, c.HeadDim, c.RopeTheta)
	add("deltanet", "%d key heads, %d value heads of %d, causal conv %d over %d channels",
		dn.KHeads, dn.VHeads, dn.HeadDim, dn.Kernel, dn.Channels())
	state := 4 * int64(c.recurrentLayers) * int64((dn.Kernel-1)*dn.Channels()+dn.VHeads*dn.HeadDim*dn.HeadDim)
	add("recurrent state", "%d bytes per sequence (float32, %d layers), beside %d bytes/token of F16 KV in %d layers",
		state, c.recurrentLayers, 4*int64(c.attnLayers)*int64(c.KVHeads*c.HeadDim), c.attnLayers)
	if c.Experts > 0 {
		add("experts", "%d of %d per token (renormalised), %d wide; shared expert %d wide, sigmoid-gated",
			c.ExpertsUsed, c.Experts, c.ExpertFFN, c.SharedFFN)
	}
	add("prefix cache", "hits stop at a cached state: each prompt's state at its last block boundary, %d bytes each", state)
	if c.MTPLayers > 0 {
		add("mtp", "%d multi-token-prediction (nextn) block after the %d layers: drafts for --speculate mtp", c.MTPLayers, c.Layers)
	}
	return f
}
