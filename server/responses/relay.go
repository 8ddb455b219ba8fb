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
// It is the local emitter with the upstream's encrypted_content
// (relayEmitter), and its ending (End).
type Relayed struct {
	relayEmitter
	p     *parsed
	store *Store
	body  []byte // the whole response, once End settled it
}

// ParseRelayed validates a Responses request of ctx's tenant as a local
// one is validated (one rule for both modes) and returns it with the
// framer of response id. previous_response_id names a response of the
// same tenant in store, whose conversation Forward sends upstream as input
// items; the response is kept as that tenant's.
func ParseRelayed(ctx context.Context, body []byte, id string, store *Store) (*stream.GenRequest, *Relayed, error) {
	tenant := auth.Tenant(ctx)
	p, err := parse(body, store.history(tenant))
	if err != nil {
		return nil, nil, err
	}
	resp := newResponse(id, p.gen.Model, p.wire, p.gen, 0)
	// The reasoning config is echoed, and its summary asked for: the
	// upstream's reasoning is shown as the summary too, as a local one is.
	resp.tenant, resp.Reasoning = tenant, p.wire.Reasoning
	// The reply may open with reasoning (whether the upstream's model
	// reasons is known only from its stream) or, with tools, a call: the
	// message item waits for text, as a local stream's does for a model
	// that reasons. The reasoning's encrypted_content is the upstream's,
	// passed on (Signed), never this server's seal: the client sends it
	// back to that upstream, which alone can open it.
	em := &emitter{resp: resp, lazy: true}
	return p.gen, &Relayed{relayEmitter: relayEmitter{em}, p: p, store: store}, nil
}

// Forward rewrites the request the upstream gets. A previous_response_id is
// this relay's, unknown to the upstream: the conversation it names goes
// instead, with this input, as input items, so any upstream that speaks
// Responses continues it without a store of its own. And the upstream is
// asked to keep nothing: its copy would be under an id nobody holds.
func (r *Relayed) Forward(fields map[string]json.RawMessage) {
	fields["store"] = json.RawMessage("false")
	if r.p.wire.PreviousResponseID == nil {
		return
	}
	delete(fields, "previous_response_id")
	fields["input"], _ = json.Marshal(inputItems(r.p.conv)) // maps of strings always marshal
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

// SetModel names the model the response reports.
func (r *Relayed) SetModel(name string) { r.resp.Model = name }

// Attach points the framer at the connection it writes now; nil: a whole
// response.
func (r *Relayed) Attach(sse *httpedge.SSE) { r.sse = sse }

// Start writes what precedes the text, up to the empty text part.
func (r *Relayed) Start() { startEvents(r.emitter, r.resp) }

// startEvents announces the response and, unless the emitter is lazy, its
// message item and text part. Before its output item is announced the
// response has no output: the SDKs index items by the output_item.added
// events.
func startEvents(em *emitter, resp *response) {
	empty := *resp
	empty.Output = []any{}
	em.event("response.created", map[string]any{"response": &empty})
	em.event("response.in_progress", map[string]any{"response": &empty})
	if !em.lazy {
		em.openMessage()
	}
}

// relayEmitter is the local emitter with the upstream's encrypted_content.
type relayEmitter struct{ *emitter }

// Signed sets the upstream's encrypted_content on the reasoning item,
// opening one if its reasoning showed no text (no summary asked).
func (e relayEmitter) Signed(sig string) error {
	e.reasoning().EncryptedContent = &sig
	return e.err()
}

// End writes the stream's last events: the done events and
// response.completed (or .incomplete), or error and response.failed.
func (r *Relayed) End(out stream.TextOutcome, end stream.TextEnd) {
	if out.Err != nil {
		failEvents(r.emitter, r.resp, out.Err)
		return
	}
	r.finish() // an empty reply is an empty message
	r.resp.complete(out.Finish, end)
	r.body = r.store.keep(r.resp, r.p)
	endEvents(r.emitter, r.resp)
}

// failEvents ends a stream with err: the error event, then response.failed
// keeping the text sent before it.
func failEvents(em *emitter, resp *response, err error) {
	c := stream.Classify(err)
	em.event("error", map[string]any{"code": c.Code, "message": err.Error(), "param": nullable(c.Param)})
	resp.fail(c.Code, err.Error())
	em.event("response.failed", map[string]any{"response": resp})
}

// endEvents ends the open item, then the response, which complete has
// settled.
func endEvents(em *emitter, resp *response) {
	em.closeOpen(resp.Status)
	final := "response.completed"
	if resp.Status == "incomplete" {
		final = "response.incomplete"
	}
	em.event(final, map[string]any{"response": resp})
}

// Body is the whole response of a non-streaming request, framed by the
// emitter attached to no connection and settled and kept by End.
func (r *Relayed) Body() []byte { return r.body }
