package responses

import (
	"context"
	"encoding/json"

	"github.com/sluicehq/sluice/server/auth"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// Relayed frames a Responses stream whose text an upstream generates (relay
// mode, server/relay) in the same events as a local stream; the relay's
// stream writer (stream.PumpText) stands where Pump stands. It holds the
// response and its event counter across connections, so a resumed stream
// continues the same sequence numbers. A finished response is kept in the
// relay's own Store, as a local one is: the upstream never sees the ids the
// client holds.
//
// It is the local framer with the upstream's encrypted_content (Signed).
type Relayed struct{ *framer }

// ParseRelayed validates a Responses request of ctx's tenant as a local
// one is validated (one rule for both modes) and returns it with the
// framer of its relayed response; the relay adds the upstream
// (Parsed.Source). previous_response_id names a response of the same
// tenant in store, whose conversation forward sends upstream as input
// items; the response is kept as that tenant's.
func ParseRelayed(ctx context.Context, body []byte, store *Store) (*httpedge.Parsed, func(fields map[string]json.RawMessage), error) {
	tenant := auth.Tenant(ctx)
	p, err := parse(body, store.history(tenant))
	if err != nil {
		return nil, nil, err
	}
	frame := func(h httpedge.Head) httpedge.Framer {
		resp := newResponse(h.ID, h.Model, p.wire, p.gen, 0)
		// The reasoning config is echoed, and its summary asked for: the
		// upstream's reasoning is shown as the summary too, as a local one is.
		resp.tenant, resp.Reasoning = tenant, p.wire.Reasoning
		// The reply may open with reasoning (whether the upstream's model
		// reasons is known only from its stream) or, with tools, a call: the
		// message item waits for text, as a local stream's does for a model
		// that reasons. The reasoning's encrypted_content is the upstream's,
		// passed on (Signed), never this server's seal: the client sends it
		// back to that upstream, which alone can open it.
		return &Relayed{&framer{emitter: &emitter{resp: resp, lazy: true}, store: store, p: p}}
	}
	return &httpedge.Parsed{Gen: p.gen, Frame: frame}, p.forward, nil
}

// forward rewrites the request the upstream gets. A previous_response_id is
// this relay's, unknown to the upstream: the conversation it names goes
// instead, with this input, as input items, so any upstream that speaks
// Responses continues it without a store of its own. And the upstream is
// asked to keep nothing: its copy would be under an id nobody holds.
func (p *parsed) forward(fields map[string]json.RawMessage) {
	fields["store"] = json.RawMessage("false")
	if p.wire.PreviousResponseID == nil {
		return
	}
	delete(fields, "previous_response_id")
	fields["input"], _ = json.Marshal(inputItems(p.conv)) // maps of strings always marshal
}

// inputItems is a conversation as Responses input items: messages, and a
// tool round trip's function_call and function_call_output items.
func inputItems(conv []stream.ChatMessage) []map[string]string {
	items := make([]map[string]string, 0, len(conv))
	for _, m := range conv {
		if m.Role == "tool" {
			items = append(items, map[string]string{"type": "function_call_output", "call_id": m.ToolCallID, "output": m.Content})
			continue
		}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			items = append(items, map[string]string{"type": "message", "role": m.Role, "content": m.Content})
		}
		for _, c := range m.ToolCalls {
			items = append(items, map[string]string{"type": "function_call", "call_id": c.ID, "name": c.Name, "arguments": c.Arguments})
		}
	}
	return items
}

// Signed sets the upstream's encrypted_content on the reasoning item,
// opening one if its reasoning showed no text (no summary asked).
func (r *Relayed) Signed(sig string) error {
	r.reasoning().EncryptedContent = &sig
	return r.err()
}
