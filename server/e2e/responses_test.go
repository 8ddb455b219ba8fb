package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOpenAIPythonResponses runs tests/openai-python/responses.py (the
// official `openai` package, pinned) against the live server on the default
// model: client.responses.stream's typed events and final response,
// client.responses.create equal to the stream (greedy), previous_response_id
// over the store, retrieve and delete, max_output_tokens as an incomplete
// response, refusals as BadRequestError naming the field.
func TestOpenAIPythonResponses(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "openai", "openai==3.57.0")
	cmd := exec.CommandContext(t.Context(), python, filepath.Join("..", "..", "tests", "openai-python", "responses.py"))
	cmd.Env = append(os.Environ(), "SLUICE_URL="+r.url)
	out, err := cmd.Output()
	var res struct {
		OK       bool     `json:"ok"`
		Failures []string `json:"failures"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil || err != nil || !res.OK {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("responses.py: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("%s", out)
	r.waitIdle(t, 5*time.Second)
}
