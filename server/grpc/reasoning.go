package grpcserver

import (
	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/stream"
)

// setReasoning reads GenerateRequest.reasoning into the stream core's
// reasoning controls (stream.SetReasoning, the one reader every HTTP API
// uses), so an effort or budget is valid here exactly when it is there,
// with the same message under this API's field names.
func setReasoning(g *stream.GenRequest, rs *sluicev1.Reasoning) error {
	if rs == nil {
		return nil
	}
	// A text or token-id prompt goes to the model as written and its reply
	// is not split into reasoning, as HTTP completions refuse reasoning_effort.
	if !g.Chat {
		return stream.InvalidParam("reasoning", "reasoning needs chat input: a text or token_ids prompt is sent as written")
	}
	ask := stream.ReasoningAsk{Enabled: rs.Enabled, Effort: rs.Effort, EffortParam: "reasoning.effort", BudgetParam: "reasoning.budget_tokens"}
	if rs.BudgetTokens != nil {
		// Clamped past int32 so that a huge value is reported as out of
		// range rather than wrapping on 32-bit ints.
		n := int(min(rs.GetBudgetTokens(), 1<<31-1))
		ask.Budget = &n
	}
	// One message holds all three, so unlike the HTTP fields they can
	// contradict each other; SetReasoning would let "off" win silently.
	if rs.Enabled != nil && !rs.GetEnabled() {
		if rs.BudgetTokens != nil {
			return stream.InvalidParam("reasoning.budget_tokens", "reasoning.budget_tokens cannot be given with reasoning.enabled false")
		}
		if rs.Effort != nil && rs.GetEffort() != "none" {
			return stream.InvalidParam("reasoning.effort", "reasoning.effort %q cannot be given with reasoning.enabled false (only \"none\" can)", rs.GetEffort())
		}
	}
	return g.SetReasoning(ask)
}
