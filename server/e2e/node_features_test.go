package e2e

import "testing"

// TestOpenAINodeFeatures runs tests/openai-node/features.mjs: the official
// Node SDK (pinned in package.json) streams logprobs, a json_schema
// response_format and a required tool call through its chat helper, and a
// reply through the Responses streaming helper; npm ci installs it when
// needed.
func TestOpenAINodeFeatures(t *testing.T) {
	r := getRig(t)
	runNode(t, r, "features.mjs", r.url)
}
