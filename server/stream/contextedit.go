package stream

import "slices"

// Anthropic's context_management edits, applied for real to the prompt:
// the server renders the conversation, so it is the server that clears.
// clear_tool_uses clears the results (and, asked, the inputs) of the
// oldest tool uses once the prompt reaches its trigger, keeping the most
// recent ones; clear_thinking drops the thinking of earlier assistant turns.
// What was cleared is reported back (ContextEdits.Applied), in the
// edits' order.

// ContextEdits are a request's edits; the parser fills them in its order.
type ContextEdits struct {
	Edits []ContextEdit
	// Applied is what each edit cleared, set when the prompt is rendered;
	// an edit that cleared nothing is not listed.
	Applied []AppliedEdit
	done    bool
}

// ContextEdit is one edit. Kind is the wire type.
type ContextEdit struct {
	Kind string // "clear_tool_uses_20250919" or "clear_thinking_20251015"
	// clear_tool_uses: clear once the prompt has Trigger tokens, keep the
	// Keep most recent tool uses, clear only when at least ClearAtLeast
	// tokens go, never clear the tools named in Exclude, and with
	// ClearInputs clear the calls' inputs too.
	Trigger, Keep, ClearAtLeast int
	Exclude                     []string
	ClearInputs                 bool
	// clear_thinking: the thinking turns kept (-1: all); ThinkingTurns is
	// how many assistant turns of the conversation carried thinking blocks
	// (the parser counts them, readable or not).
	KeepThinking, ThinkingTurns int
}

// AppliedEdit reports one edit's clearing, as Anthropic's
// context_management.applied_edits does.
type AppliedEdit struct {
	Kind                 string
	ClearedToolUses      int
	ClearedThinkingTurns int
	ClearedInputTokens   int
}

// ClearedToolResult stands in for a cleared tool result, so the model
// still sees that the call was answered.
const ClearedToolResult = "[tool result cleared to save context]"

// clearThinking returns msgs without the reasoning of all but the keep
// most recent assistant turns that carry some.
func clearThinking(msgs []ChatMessage, keep int) []ChatMessage {
	out := slices.Clone(msgs)
	kept := 0
	for i := len(out) - 1; i >= 0; i-- {
		if out[i].Reasoning == "" {
			continue
		}
		if kept < keep {
			kept++
			continue
		}
		out[i].Reasoning = ""
	}
	return out
}

// clearToolUses returns msgs with the results (and, asked, inputs) of all
// but the ed.Keep most recent tool uses cleared, and how many it cleared.
func clearToolUses(msgs []ChatMessage, ed ContextEdit) ([]ChatMessage, int) {
	names := map[string]string{} // call id → tool name
	var order []string           // call ids, oldest first
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			names[c.ID] = c.Name
			order = append(order, c.ID)
		}
	}
	clear := map[string]bool{}
	if n := len(order) - ed.Keep; n > 0 {
		for _, id := range order[:n] {
			if !slices.Contains(ed.Exclude, names[id]) {
				clear[id] = true
			}
		}
	}
	if len(clear) == 0 {
		return msgs, 0
	}
	out := make([]ChatMessage, len(msgs))
	for i, m := range msgs {
		if m.Role == "tool" && clear[m.ToolCallID] {
			m.Content = ClearedToolResult
		}
		if ed.ClearInputs && len(m.ToolCalls) > 0 {
			calls := slices.Clone(m.ToolCalls)
			for j := range calls {
				if clear[calls[j].ID] {
					calls[j].Arguments = "{}"
				}
			}
			m.ToolCalls = calls
		}
		out[i] = m
	}
	return out, len(clear)
}

// applyContextEdits runs g's edits once, before the prompt is encoded for
// good: encode renders and tokenizes g as it stands.
func applyContextEdits(g *GenRequest, encode func() ([]int32, error)) error {
	e := g.ContextEdits
	if e == nil || e.done || !g.Chat {
		return nil
	}
	e.done = true
	for _, ed := range e.Edits {
		if ed.Kind == "clear_thinking_20251015" {
			if err := applyThinking(g, ed, encode); err != nil {
				return err
			}
			continue
		}
		before, err := encode()
		if err != nil {
			return err
		}
		if len(before) < ed.Trigger {
			continue
		}
		msgs, n := clearToolUses(g.Messages, ed)
		if n == 0 {
			continue
		}
		kept := g.Messages
		g.Messages = msgs
		after, err := encode()
		if err != nil {
			return err
		}
		freed := len(before) - len(after)
		if freed < max(ed.ClearAtLeast, 1) {
			g.Messages = kept // not worth a cache miss, as Anthropic rules
			continue
		}
		e.Applied = append(e.Applied, AppliedEdit{Kind: ed.Kind, ClearedToolUses: n, ClearedInputTokens: freed})
	}
	return nil
}

// applyThinking runs a clear_thinking edit: the thinking of all but the
// kept most recent turns leaves the prompt (where the template showed it:
// most show only the current tool loop's), and the turns and tokens it
// cleared are reported.
func applyThinking(g *GenRequest, ed ContextEdit, encode func() ([]int32, error)) error {
	if ed.KeepThinking < 0 || ed.ThinkingTurns <= ed.KeepThinking {
		return nil
	}
	before, err := encode()
	if err != nil {
		return err
	}
	g.Messages = clearThinking(g.Messages, ed.KeepThinking)
	after, err := encode()
	if err != nil {
		return err
	}
	g.ContextEdits.Applied = append(g.ContextEdits.Applied, AppliedEdit{Kind: ed.Kind,
		ClearedThinkingTurns: ed.ThinkingTurns - ed.KeepThinking, ClearedInputTokens: max(len(before)-len(after), 0)})
	return nil
}
