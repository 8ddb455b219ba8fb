package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestOpenAINodeFeatures runs tests/openai-node/features.mjs: the official
// Node SDK (pinned in package.json) streams logprobs, a json_schema
// response_format and a required tool call through its chat helper, and a
// reply through the Responses streaming helper; npm ci installs it when
// needed.
func TestOpenAINodeFeatures(t *testing.T) {
	r := getRig(t)
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		t.Skip("node or npm not installed")
	}
	dir := filepath.Join("..", "..", "tests", "openai-node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		cmd := exec.CommandContext(t.Context(), npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("npm ci failed (no registry?): %v\n%s", err, out)
		}
	}
	cmd := exec.CommandContext(t.Context(), node, "features.mjs")
	cmd.Dir = dir
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
		t.Fatalf("node features.mjs: %v\n%s\n%s", err, out, stderr)
	}
	t.Logf("%s", out)
	r.waitIdle(t, 5*time.Second)
}
