package e2e

import (
	"path/filepath"
	"testing"
)

// TestOpenAIPythonVLLMPromptFields runs tests/openai-python/vllm_prompt.py:
// vLLM's prompt extensions (prompt_logprobs, echo with logprobs,
// continuous_usage_stats, truncate_prompt_tokens, continue_final_message,
// custom roles) through the official SDK, whole and streamed.
func TestOpenAIPythonVLLMPromptFields(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "openai", "openai==3.57.0")
	runPyScript(t, r, python, filepath.Join("openai-python", "vllm_prompt.py"), "SLUICE_URL="+r.url)
}
