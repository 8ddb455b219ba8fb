//go:build cuda || cudaemu

package modeltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/kernels/cpu"
	"github.com/sluicehq/sluice/models"
)

// realModel is the cut checkpoint to compare: SLUICE_REAL_MODEL (on the
// device, first.sh sets it to the carried bin/device/real-model.gguf), else
// the default model cut here to its first two layers (scripts/device/cutmodel),
// else none.
func realModel(t *testing.T) string {
	if p := os.Getenv("SLUICE_REAL_MODEL"); p != "" {
		return p
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(root, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	if _, err := os.Stat(full); err != nil {
		t.Skip("no SLUICE_REAL_MODEL and no models/SmolLM2-135M-Instruct.Q4_1.gguf (make model)")
	}
	cut := filepath.Join(t.TempDir(), "real-model.gguf")
	cmd := exec.Command("go", "run", "./scripts/device/cutmodel", "-layers", "2", full, cut)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cutmodel: %v\n%s", err, out)
	}
	return cut
}

// TestRealModelMatchesCPU is TestForwardMatchesCPU on trained weights: a
// real checkpoint's first layers (quantized as released, embedding
// requantized by cutmodel), whose activations have the outliers random
// weights lack. A prompt, then decode steps fed the CPU's greedy tokens:
// logits within the same bound, greedy choices the same wherever the CPU's
// lead is clear.
func TestRealModelMatchesCPU(t *testing.T) {
	path := realModel(t)
	src, err := models.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg, err := src.Config()
	if err != nil {
		t.Fatal(err)
	}
	opts := models.Options{MaxBatchTokens: 64, MaxSeqs: 1, BlockSize: 16, KVBlocks: 16}
	mc, err := models.Load(src, cpu.New(runtime.NumCPU()), opts)
	if err != nil {
		t.Fatal(err)
	}
	mg, err := models.Load(src, newCUDA(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	prompt, steps := make([]int32, 24), 8
	if emulatedModel {
		prompt, steps = prompt[:10], 3
	}
	for i := range prompt { // spread over the vocabulary, the first ids (specials) too
		prompt[i] = int32((i*7919 + 1) % cfg.Vocab)
	}
	sc, sg := &sequence{}, &sequence{}
	var nc, ng int32
	toks := [][]int32{prompt}
	agree, worst := 0, 0.0
	for i := range steps {
		lc, err := mc.Forward(step([]*sequence{sc}, toks, 16, &nc))
		if err != nil {
			t.Fatal(err)
		}
		lg, err := mg.Forward(step([]*sequence{sg}, toks, 16, &ng))
		if err != nil {
			t.Fatal(err)
		}
		e := relErr(lg, lc)
		worst = max(worst, e)
		tc, margin := argmax(lc)
		tg, _ := argmax(lg)
		if tc == tg {
			agree++
		} else if d := rmsDiff(lg, lc); float64(margin) > 6*d {
			t.Errorf("step %d: greedy token %d on CUDA, %d on CPU (CPU margin %.3f, rms logit difference %.3f)", i, tg, tc, margin, d)
		}
		toks = [][]int32{{int32(tc)}}
	}
	t.Logf("real model %s (%d layers, vocab %d): greedy agreement %d/%d, worst ‖cuda−cpu‖/‖cpu‖ of the logits %.2e",
		filepath.Base(path), cfg.Layers, cfg.Vocab, agree, steps, worst)
	if worst > 5e-2 {
		t.Errorf("logits differ by %.3g relative, bound 5e-2", worst)
	}
}
