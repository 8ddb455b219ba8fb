package models

import (
	"slices"

	"github.com/sluicehq/sluice/kernels"
)

// kvElemBytes is the size of one cached K or V value: both backends keep F16.
const kvElemBytes = 2

// KVBytesPerToken is what one token costs in the KV cache when every layer
// keeps it: K and V for each layer's KV heads.
func (c Config) KVBytesPerToken() int64 {
	return int64(2 * c.Layers * c.KVHeads * c.HeadDim * kvElemBytes)
}

// KVBytes is the KV memory a sequence of n tokens needs in blocks of
// blockSize tokens: with windowed, a window layer keeps only the blocks that
// hold its last Window positions (the block the window starts in included),
// as a cache that frees blocks outside the window would; without, every
// layer keeps all n.
func (c Config) KVBytes(n, blockSize int, windowed bool) int64 {
	blocks := func(tokens int) int64 { return int64((tokens + blockSize - 1) / blockSize) }
	perLayerBlock := int64(2*c.KVHeads*c.HeadDim*kvElemBytes) * int64(blockSize)
	var total int64
	for i := range c.Layers {
		b := blocks(n)
		if windowed && c.IsWindowLayer(i) && n > c.Window {
			// Positions (n−Window, n] span at most this many blocks.
			b = min(b, blocks(c.Window-1)+1)
		}
		total += b * perLayerBlock
	}
	return total
}

// TypeShare is one tensor type's part of a model's weights.
type TypeShare struct {
	DType   kernels.DType
	Tensors int
	Params  int64
	Bytes   int64
}

// WeightMix sums tensors by type, in order of first appearance, and returns
// the parameter count over all of them.
func WeightMix(tensors []TensorInfo) (mix []TypeShare, params int64) {
	for _, t := range tensors {
		n := int64(1)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		params += n
		i := slices.IndexFunc(mix, func(s TypeShare) bool { return s.DType == t.DType })
		if i < 0 {
			mix = append(mix, TypeShare{DType: t.DType})
			i = len(mix) - 1
		}
		mix[i].Tensors++
		mix[i].Params += n
		mix[i].Bytes += int64(t.Size)
	}
	return mix, params
}
