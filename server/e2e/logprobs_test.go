package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOpenAIPythonLogprobs runs tests/openai-python/logprobs.py (the official
// `openai` package, pinned) against the live server on the default model:
// chat logprobs and top_logprobs, whole and streamed, checked against each
// other, against the content's bytes and against greedy decoding.
func TestOpenAIPythonLogprobs(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "openai", "openai==3.57.0")
	cmd := exec.CommandContext(t.Context(), python, filepath.Join("..", "..", "tests", "openai-python", "logprobs.py"))
	cmd.Env = append(os.Environ(), "SLUICE_URL="+r.url)
	out, err := cmd.Output()
	var res struct {
		OK bool `json:"ok"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || !res.OK {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("logprobs.py: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("%s", out)
	r.waitIdle(t, 5*time.Second)
}
