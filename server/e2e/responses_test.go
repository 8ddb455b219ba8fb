package e2e

import (
	"path/filepath"
	"testing"
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
	runPyScript(t, r, python, filepath.Join("openai-python", "responses.py"), "SLUICE_URL="+r.url)
}
