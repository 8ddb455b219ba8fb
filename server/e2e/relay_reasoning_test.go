package e2e

import (
	"testing"

	"github.com/sluicehq/sluice/server/relay"
)

// TestRelayReasoningSDKs runs tests/reasoning-python/reasoning.py (the
// official openai and anthropic packages) through a relay whose upstream
// is a Sluice serving SmolLM2 as a model that always reasons: chat's
// reasoning_content and reasoning with the upstream's reasoning tokens
// (its budget enforced upstream), a Messages thinking block whose
// signature, sent back through the relay, the upstream opens, a Responses
// reasoning item whose encrypted_content a store-false client sends back
// the same way. Before the relay carried reasoning, chat's reasoning was
// empty and a Messages request failed (502 on the thinking_delta).
func TestRelayReasoningSDKs(t *testing.T) {
	up, env := serveThinking(t)
	front := relayTo(t, relay.Upstream{URL: up}, keepAlive)
	runReasoningPy(t, front.url, env)
}
