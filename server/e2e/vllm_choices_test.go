package e2e

import (
	"path/filepath"
	"testing"
)

// TestOpenAIPythonVLLMChoices runs tests/openai-python/vllm_choices.py:
// vLLM's prompt extensions with n > 1 and lists of prompts
// (prompt_logprobs, echo with logprobs, chat echo, continuous_usage_stats)
// through the official SDK, whole and streamed.
func TestOpenAIPythonVLLMChoices(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "openai", "openai==3.57.0")
	runPyScript(t, r, python, filepath.Join("openai-python", "vllm_choices.py"), "SLUICE_URL="+r.url)
}
