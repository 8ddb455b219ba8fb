package anthropic

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// What Claude Code sends beside the conversation: thinking and
// output_config.effort (the stream core's reasoning controls) and
// context_management (edits the stream core applies to the prompt,
// reported back in the message's context_management).

// setThinking reads thinking and output_config.effort. enabled needs a
// budget_tokens of at least 1024 below max_tokens (Anthropic's rule);
// adaptive leaves the budget to the effort; disabled turns thinking off.
// display (summarized or omitted) is accepted: a thinking block here is
// the reasoning itself, never a summary of it.
func setThinking(g *stream.GenRequest, wr *wireRequest) error {
	ask := stream.ReasoningAsk{EffortParam: "output_config.effort", BudgetParam: "thinking.budget_tokens"}
	if oc := wr.OutputConfig; oc != nil && oc.Effort != nil {
		ask.Effort = oc.Effort
	}
	if t := wr.Thinking; t != nil {
		switch t.Type {
		case "enabled":
			b := t.BudgetTokens
			if b == nil {
				return stream.InvalidParam("thinking.budget_tokens", "thinking.budget_tokens: field required")
			}
			if *b < 1024 {
				return stream.InvalidParam("thinking.budget_tokens", "thinking.budget_tokens must be at least 1024, got %d", *b)
			}
			if wr.MaxTokens != nil && *b >= *wr.MaxTokens {
				return stream.InvalidParam("thinking.budget_tokens", "thinking.budget_tokens (%d) must be less than max_tokens (%d)", *b, *wr.MaxTokens)
			}
			ask.Budget = b
		case "adaptive":
		case "disabled":
			off := false
			ask.Enabled = &off
		default:
			return stream.InvalidParam("thinking.type", "thinking.type must be enabled, adaptive or disabled, got %q", t.Type)
		}
		if d := t.Display; d != nil && *d != "summarized" && *d != "omitted" {
			return stream.InvalidParam("thinking.display", "thinking.display must be summarized or omitted, got %q", *d)
		}
	}
	if ask.Effort != nil && *ask.Effort == "none" { // not one of Anthropic's levels
		return stream.InvalidParam("output_config.effort", "output_config.effort must be low, medium, high or max, got \"none\"")
	}
	return g.SetReasoning(ask)
}

// wireEdit is one context_management edit.
type wireEdit struct {
	Type            string          `json:"type"`
	Trigger         *wireAmount     `json:"trigger"`
	Keep            json.RawMessage `json:"keep"`
	ClearAtLeast    *wireAmount     `json:"clear_at_least"`
	ExcludeTools    []string        `json:"exclude_tools"`
	ClearToolInputs *bool           `json:"clear_tool_inputs"`
}

type wireAmount struct {
	Type  string `json:"type"`
	Value int    `json:"value"`
}

// amount reads a {type, value} field of unit typ, or def when absent.
func amount(a *wireAmount, param, typ string, def int) (int, error) {
	if a == nil {
		return def, nil
	}
	if a.Type != typ {
		return 0, stream.InvalidParam(param+".type", "%s.type must be %s, got %q", param, typ, a.Type)
	}
	if a.Value < 0 {
		return 0, stream.InvalidParam(param+".value", "%s.value must not be negative, got %d", param, a.Value)
	}
	return a.Value, nil
}

// contextEdits reads context_management: {"edits": [...]}. Defaults are
// Anthropic's: clear tool uses from 100,000 input tokens keeping the 3
// most recent; keep the last thinking turn.
func contextEdits(raw json.RawMessage, thinkingTurns int) (*stream.ContextEdits, error) {
	if !httpedge.Present(raw) {
		return nil, nil
	}
	var cm struct {
		Edits []json.RawMessage `json:"edits"`
	}
	if err := httpedge.Decode(raw, &cm, "context_management"); err != nil {
		return nil, err
	}
	out := &stream.ContextEdits{}
	for i, r := range cm.Edits {
		param := fmt.Sprintf("context_management.edits[%d]", i)
		var we wireEdit
		if err := httpedge.Decode(r, &we, param); err != nil {
			return nil, err
		}
		ed := stream.ContextEdit{Kind: we.Type}
		var err error
		switch we.Type {
		case "clear_tool_uses_20250919":
			if ed.Trigger, err = amount(we.Trigger, param+".trigger", "input_tokens", 100000); err != nil {
				return nil, err
			}
			var keep *wireAmount
			if httpedge.Present(we.Keep) {
				if err := httpedge.Decode(we.Keep, &keep, param+".keep"); err != nil {
					return nil, err
				}
			}
			if ed.Keep, err = amount(keep, param+".keep", "tool_uses", 3); err != nil {
				return nil, err
			}
			if ed.ClearAtLeast, err = amount(we.ClearAtLeast, param+".clear_at_least", "input_tokens", 0); err != nil {
				return nil, err
			}
			ed.Exclude = slices.Clone(we.ExcludeTools)
			ed.ClearInputs = we.ClearToolInputs != nil && *we.ClearToolInputs
		case "clear_thinking_20251015":
			ed.KeepThinking, ed.ThinkingTurns = 1, thinkingTurns
			if httpedge.Present(we.Keep) {
				var all string
				if json.Unmarshal(we.Keep, &all) == nil {
					if all != "all" {
						return nil, stream.InvalidParam(param+".keep", "%s.keep must be \"all\" or {\"type\": \"thinking_turns\", \"value\": n}, got %q", param, all)
					}
					ed.KeepThinking = -1
				} else {
					var keep *wireAmount
					if err := httpedge.Decode(we.Keep, &keep, param+".keep"); err != nil {
						return nil, err
					}
					if ed.KeepThinking, err = amount(keep, param+".keep", "thinking_turns", 1); err != nil {
						return nil, err
					}
				}
			}
		default:
			return nil, stream.InvalidParam(param+".type", "%s.type must be clear_tool_uses_20250919 or clear_thinking_20251015, got %q", param, we.Type)
		}
		out.Edits = append(out.Edits, ed)
	}
	return out, nil
}

// contextManagement is the response's context_management: what the edits
// cleared (nil when the request asked for none).
func contextManagement(e *stream.ContextEdits) map[string]any {
	if e == nil {
		return nil
	}
	applied := []map[string]any{}
	for _, a := range e.Applied {
		m := map[string]any{"type": a.Kind, "cleared_input_tokens": a.ClearedInputTokens}
		if a.Kind == "clear_thinking_20251015" {
			m["cleared_thinking_turns"] = a.ClearedThinkingTurns
		} else {
			m["cleared_tool_uses"] = a.ClearedToolUses
		}
		applied = append(applied, m)
	}
	return map[string]any{"applied_edits": applied}
}
