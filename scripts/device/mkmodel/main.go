// Command mkmodel writes the small random Llama that the device script's
// end-to-end stage serves: a Hugging Face directory (config.json, BF16
// safetensors, tokenizer.json with a byte-level BPE vocabulary and a chat
// template) from models/modeltest, a few MB, so it travels with the
// binaries and the GPU machine needs neither Go nor a download.
//
//	go run ./scripts/device/mkmodel DIR
package main

import (
	"fmt"
	"os"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/models/modeltest"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mkmodel DIR")
		os.Exit(2)
	}
	// GQA, a context long enough for 128-token streams after a 64-word prompt,
	// head size 64 (the attention kernel's range), every kernel path of a decode.
	spec := modeltest.Spec{Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 1024, Seed: 11, ContextLen: 1024, Tied: true}
	if err := modeltest.WriteHF(os.Args[1], spec, kernels.BF16); err != nil {
		fmt.Fprintln(os.Stderr, "mkmodel:", err)
		os.Exit(1)
	}
}
