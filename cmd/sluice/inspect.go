package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/models"
	"github.com/sluicehq/sluice/server/nvml"
)

func runInspect(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	model := fs.String("model", os.Getenv("SLUICE_MODEL"), "model file (.gguf) or Hugging Face directory")
	tensors := fs.Bool("tensors", false, "list every tensor, not only the totals per type")
	gpus := fs.Bool("gpus", false, "list the NVIDIA GPUs NVML sees (utilization, memory, power, temperature, clock)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *gpus {
		if err := nvml.Inspect(os.Stdout, nvml.System()); err != nil {
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
	cfg, err := src.Config()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "file\t%s\n", src.Path())
	fmt.Fprintf(w, "architecture\t%s\n", cfg.Arch)
	fmt.Fprintf(w, "layers\t%d\nhidden\t%d\nffn\t%d\n", cfg.Layers, cfg.Hidden, cfg.FFN)
	fmt.Fprintf(w, "heads\t%d (kv %d, head size %d)\n", cfg.Heads, cfg.KVHeads, cfg.HeadDim)
	fmt.Fprintf(w, "vocab\t%d\ncontext\t%d\n", cfg.Vocab, cfg.ContextLen)
	fmt.Fprintf(w, "rope\ttheta %g, style %v, scaling %v\n", cfg.RopeTheta, cfg.RopeStyle, cfg.RopeScaling != nil)
	fmt.Fprintf(w, "rms eps\t%g\ntied embeddings\t%v\nqkv bias\t%v\n", cfg.RMSEps, cfg.TiedEmbeddings, cfg.QKVBias)
	if cfg.Experts > 0 {
		fmt.Fprintf(w, "experts\t%d per layer, %d per token (expert ffn %d, top-k weights renormalised: %v)\n",
			cfg.Experts, cfg.ExpertsUsed, cfg.ExpertFFN, cfg.ExpertNorm)
		if cfg.SharedExpertFFN > 0 {
			fmt.Fprintf(w, "shared expert\tffn %d, sigmoid-gated per token\n", cfg.SharedExpertFFN)
		}
	}
	fmt.Fprintf(w, "qk norm\t%v (over whole projections: %v)\n", cfg.QKNorm, cfg.QKNormWhole)
	fmt.Fprintf(w, "attention\t%s\n", windowLayout(cfg))
	fmt.Fprintf(w, "kv cache\t%d bytes/token (F16, all layers)", cfg.KVBytesPerToken())
	if cfg.Window > 0 {
		n := cfg.ContextLen
		fmt.Fprintf(w, "; a %d-token sequence: %.1f MiB (%.1f MiB were window layers to keep only their window)",
			n, float64(cfg.KVBytes(n, 16, false))/(1<<20), float64(cfg.KVBytes(n, 16, true))/(1<<20))
	}
	fmt.Fprintln(w)
	if g, ok := src.(interface{ Tensors() []models.TensorInfo }); ok {
		if *tensors {
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
	}
	return w.Flush()
}

// windowLayout describes which layers attend globally and which over a
// sliding window: "global" for the Llama family, else the window size and the
// global layers' indices.
func windowLayout(c models.Config) string {
	if c.Window <= 0 {
		return "global (every layer reads the whole context)"
	}
	var global []string
	for i := range c.Layers {
		if !c.IsWindowLayer(i) {
			global = append(global, strconv.Itoa(i))
		}
	}
	return fmt.Sprintf("sliding window of %d tokens on %d layers (RoPE base %g); global on layers %s",
		c.Window, c.Layers-len(global), c.RopeThetaLocal, strings.Join(global, ","))
}
