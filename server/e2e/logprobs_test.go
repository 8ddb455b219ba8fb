package e2e

import (
	"path/filepath"
	"testing"
)

// TestOpenAIPythonLogprobs runs tests/openai-python/logprobs.py (the official
// `openai` package, pinned) against the live server on the default model:
// chat logprobs and top_logprobs, whole and streamed, checked against each
// other, against the content's bytes and against greedy decoding.
func TestOpenAIPythonLogprobs(t *testing.T) {
	r := getRig(t)
	python := pyVenv(t, "openai", "openai==3.57.0")
	runPyScript(t, r, python, filepath.Join("openai-python", "logprobs.py"), "SLUICE_URL="+r.url)
}
