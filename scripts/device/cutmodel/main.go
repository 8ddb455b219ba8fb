// Command cutmodel cuts a real GGUF checkpoint to its first layers, the
// embedding requantized, so that a real-weights CPU-vs-GPU logit comparison
// fits the device machine's carry (64 MiB with the working tree; the default
// model's GGUF is 98 MB). The cut model is a real model's first layers and
// final norm and head: its logits are no language model's, but every weight
// is a trained one, with a trained one's magnitudes and outliers, which
// random weights do not have.
//
//	go run ./scripts/device/cutmodel [-layers 4] [-embed Q4_1] models/SmolLM2-135M-Instruct.Q4_1.gguf bin/device/real-model.gguf
//
// scripts/device/first.sh's model stage runs TestRealModelMatchesCPU on it
// (bin/device/real-model.gguf, found as SLUICE_REAL_MODEL).
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/quant"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/models/modeltest"
)

func main() {
	layers := flag.Int("layers", 4, "layers to keep, from the first")
	embed := flag.String("embed", "Q4_1", "type of the token embedding (and the tied head): F16, BF16, Q8_0, Q4_1, Q4_0, ...")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: cutmodel [-layers N] [-embed TYPE] SRC.gguf DST.gguf")
		os.Exit(2)
	}
	dt, ok := dtypeNamed(*embed)
	if !ok {
		fmt.Fprintf(os.Stderr, "cutmodel: -embed %s: not a type this build quantizes\n", *embed)
		os.Exit(2)
	}
	n, err := cut(flag.Arg(0), flag.Arg(1), *layers, dt)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cutmodel: %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d layers, embedding %v, %.1f MiB\n", flag.Arg(1), *layers, dt, float64(n)/(1<<20))
}

func dtypeNamed(name string) (kernels.DType, bool) {
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_1,
		kernels.Q5_0, kernels.Q5_1, kernels.Q4_K, kernels.Q5_K, kernels.Q6_K} {
		if strings.EqualFold(dt.String(), name) {
			return dt, true
		}
	}
	return 0, false
}

// cut writes dst: src's metadata with block_count = layers, the tensors of
// blocks 0..layers-1 and every tensor outside the blocks as they are, but
// token_embd.weight requantized to embed. It returns dst's size.
func cut(src, dst string, layers int, embed kernels.DType) (int64, error) {
	g, err := models.OpenGGUF(src)
	if err != nil {
		return 0, err
	}
	defer g.Close()
	arch, _ := g.String("general.architecture")
	total, ok := g.Uint(arch + ".block_count")
	if !ok {
		return 0, fmt.Errorf("%s: no %s.block_count", src, arch)
	}
	if layers < 1 || uint64(layers) > total {
		return 0, fmt.Errorf("-layers %d: %s has %d", layers, src, total)
	}
	var meta []modeltest.KV
	for _, k := range g.Keys() {
		v, _ := g.Meta(k)
		switch k {
		case arch + ".block_count":
			v = uint32(layers)
		case "general.name":
			v = fmt.Sprintf("%v, first %d of %d layers", v, layers, total)
		}
		meta = append(meta, modeltest.KV{Key: k, Value: v})
	}
	var tensors []modeltest.Tensor
	for _, ti := range g.Tensors() {
		if l, ok := block(ti.Name); ok && l >= layers {
			continue
		}
		t, err := g.Tensor(ti.Name)
		if err != nil {
			return 0, err
		}
		data, dt := t.Data, t.DType
		if ti.Name == "token_embd.weight" && dt != embed {
			if data, err = requantize(t, embed); err != nil {
				return 0, err
			}
			dt = embed
		}
		tensors = append(tensors, modeltest.Tensor{Name: ti.Name, DType: dt, Shape: t.Shape, Data: data})
	}
	f, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	if err := modeltest.EncodeGGUF(f, meta, tensors, g.Alignment()); err != nil {
		f.Close()
		return 0, fmt.Errorf("write %s: %w", dst, err)
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	fi, err := os.Stat(dst)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func requantize(t kernels.HostTensor, to kernels.DType) ([]byte, error) {
	elems := 1
	for _, d := range t.Shape {
		elems *= d
	}
	if cols := t.Shape[len(t.Shape)-1]; cols%to.BlockElems() != 0 {
		return nil, fmt.Errorf("%s: rows of %d are not whole %v blocks", t.Name, cols, to)
	}
	f := make([]float32, elems)
	if err := quant.Dequantize(t.DType, t.Data, f); err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	b, err := quant.Quantize(to, f)
	if err != nil {
		return nil, fmt.Errorf("%s as %v: %w", t.Name, to, err)
	}
	return b, nil
}

// block is the layer index of a "blk.N." tensor.
func block(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	l, err := strconv.Atoi(n)
	return l, err == nil
}
