package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/server/nvml"
)

func runInspect(args []string) error { return inspect(os.Stdout, args) }

func inspect(out io.Writer, args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	model := fs.String("model", os.Getenv("SLUICE_MODEL"), "model file (.gguf) or Hugging Face directory")
	tensors := fs.Bool("tensors", false, "list every tensor, not only the totals per type")
	gpus := fs.Bool("gpus", false, "list the NVIDIA GPUs NVML sees (utilization, memory, power, temperature, clock)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *gpus {
		if err := nvml.Inspect(out, nvml.System()); err != nil {
			return err
		}
		if *model == "" {
			return nil
		}
	}
	if *model == "" {
		return errors.New("--model is required")
	}
	src, err := models.Open(*model)
	if err != nil {
		return err
	}
	defer src.Close()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// The hybrid Qwen3.5 files have a config of their own (Config refuses
	// them: their layers are not all attention layers).
	if g, ok := src.(tensorLister); ok && models.IsQwen35(src) {
		c, err := models.Qwen35ConfigOf(src)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "file\t%s\narchitecture\t%s\n", src.Path(), c.Arch)
		fmt.Fprintf(w, "hidden\t%d\nffn\t%d\nvocab\t%d\ncontext\t%d\n", c.Hidden, c.FFN, c.Vocab, c.ContextLen)
		fmt.Fprintf(w, "rms eps\t%g\ntied embeddings\t%v\n", c.RMSEps, c.TiedEmbeddings)
		for _, f := range models.DescribeQwen35(c) {
			fmt.Fprintf(w, "%s\t%s\n", f.Key, f.Value)
		}
		weightLines(w, g, *tensors)
		return w.Flush()
	}
	cfg, err := src.Config()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "file\t%s\n", src.Path())
	fmt.Fprintf(w, "architecture\t%s\n", cfg.Arch)
	fmt.Fprintf(w, "layers\t%d\nhidden\t%d\nffn\t%d\n", cfg.Layers, cfg.Hidden, cfg.FFN)
	fmt.Fprintf(w, "heads\t%d (kv %d, head size %d)\n", cfg.Heads, cfg.KVHeads, cfg.HeadDim)
	fmt.Fprintf(w, "vocab\t%d\ncontext\t%d\n", cfg.Vocab, cfg.ContextLen)
	fmt.Fprintf(w, "rms eps\t%g\ntied embeddings\t%v\nqkv bias\t%v\n", cfg.RMSEps, cfg.TiedEmbeddings, cfg.QKVBias)
	for _, f := range models.Describe(cfg, src) {
		fmt.Fprintf(w, "%s\t%s\n", f.Key, f.Value)
	}
	fmt.Fprintf(w, "kv cache\t%d bytes/token (F16, all layers)", cfg.KVBytesPerToken())
	if cfg.Window > 0 {
		n := cfg.ContextLen
		fmt.Fprintf(w, "; a %d-token sequence: %.1f MiB (%.1f MiB were window layers to keep only their window)",
			n, float64(cfg.KVBytes(n, 16, false))/(1<<20), float64(cfg.KVBytes(n, 16, true))/(1<<20))
	}
	fmt.Fprintln(w)
	if g, ok := src.(tensorLister); ok {
		weightLines(w, g, *tensors)
	}
	return w.Flush()
}

type tensorLister interface{ Tensors() []models.TensorInfo }

// weightLines writes the weights' totals per type (and every tensor with
// all): what a file costs in memory whatever its architecture.
func weightLines(w io.Writer, g tensorLister, all bool) {
	if all {
		for _, t := range g.Tensors() {
			fmt.Fprintf(w, "  %s\t%v\t%v\t%d bytes\n", t.Name, t.DType, t.Shape, t.Size)
		}
	}
	mix, params := models.WeightMix(g.Tensors())
	var bytes int64
	for _, s := range mix {
		fmt.Fprintf(w, "tensors %v\t%d (%.1f MiB, %.1f%% of parameters)\n", s.DType, s.Tensors,
			float64(s.Bytes)/(1<<20), 100*float64(s.Params)/float64(max(params, 1)))
		bytes += s.Bytes
	}
	fmt.Fprintf(w, "parameters\t%d (%.0fM)\n", params, float64(params)/1e6)
	fmt.Fprintf(w, "weights\t%.1f MiB in %d tensors (%.2f bits/parameter)\n",
		float64(bytes)/(1<<20), len(g.Tensors()), 8*float64(bytes)/float64(max(params, 1)))
	amxCacheLine(w, g.Tensors())
}

// amxCacheLine writes what the CPU backend's AMX weight cache
// (kernels/cpu/amxcache.go) holds once prompts have used every matrix: the
// matrices a prompt row multiplies, and the output head apart, which only
// prompt logprobs (every row's logits) send through the tiled path. Token
// embeddings are looked up, never multiplied, so they cost nothing.
func amxCacheLine(w io.Writer, ts []models.TensorInfo) {
	names := map[string]bool{}
	for _, t := range ts {
		names[t.Name] = true
	}
	isHead := func(name string) bool {
		switch name {
		case "output.weight", "lm_head.weight":
			return true
		case "token_embd.weight", "model.embed_tokens.weight": // tied
			return !names["output.weight"] && !names["lm_head.weight"]
		}
		return false
	}
	var layers, head int64
	for _, t := range ts {
		if len(t.Shape) != 2 {
			continue // expert stacks go through the row kernels
		}
		b := cpu.AMXCacheBytes(t.DType, t.Shape[0], t.Shape[1])
		switch {
		case isHead(t.Name):
			head += b
		case !strings.Contains(t.Name, "embd") && !strings.Contains(t.Name, "embed"):
			layers += b
		}
	}
	if layers+head == 0 {
		return
	}
	state := "on"
	if !cpu.AMXCacheEnabled() {
		state = "off (neither AMX nor AVX-512 VNNI, or SLUICE_AMX_CACHE=0 or SLUICE_VNNI_TILES=0)"
	}
	fmt.Fprintf(w, "amx weight cache\t%.1f MiB for the layers' matrices, %.1f MiB more for the output head with prompt logprobs; this machine: %s\n",
		float64(layers)/(1<<20), float64(head)/(1<<20), state)
}
