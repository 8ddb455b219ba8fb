package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
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
	if g, ok := src.(interface{ Tensors() []models.TensorInfo }); ok {
		type total struct{ count, bytes int64 }
		byType := map[string]*total{}
		var order []string
		for _, t := range g.Tensors() {
			if *tensors {
				fmt.Fprintf(w, "  %s\t%v\t%v\t%d bytes\n", t.Name, t.DType, t.Shape, t.Size)
			}
			k := t.DType.String()
			if byType[k] == nil {
				byType[k] = &total{}
				order = append(order, k)
			}
			byType[k].count++
			byType[k].bytes += int64(t.Size)
		}
		var all int64
		for _, k := range order {
			fmt.Fprintf(w, "tensors %s\t%d (%.1f MiB)\n", k, byType[k].count, float64(byType[k].bytes)/(1<<20))
			all += byType[k].bytes
		}
		fmt.Fprintf(w, "weights\t%.1f MiB in %d tensors\n", float64(all)/(1<<20), len(g.Tensors()))
	}
	return w.Flush()
}
