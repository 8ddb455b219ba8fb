package responses

import (
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// streamState is a Responses stream kept for a reconnect: the parsed
// request, the engine request as submitted (seed fixed), the TextStream
// holding every token consumed, the response being built and the emitter
// (its sequence numbers and text go on across connections; its writer
// changes with each). The holder of Retained's lease owns it.
type streamState struct {
	*httpedge.Retained
	p   *parsed
	req engine.Request
	ts  *stream.TextStream
	// tools parses the reply for calls across connections; nil without tools.
	tools *stream.ToolStream
	resp  *response
	em    emitter
	done  bool // the log ends with the final event: nothing left to generate
}

// resume replays the events after Last-Event-ID and, when the generation
// was cut short by a disconnect, continues it from the tokens already
// produced (stream.Continue): the client sees one response, generated once.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, id string) {
	rc, err := h.env.Streams.Open(r, id, ours)
	h.reconnect(w, rc, err)
}

// streamGet serves GET /v1/responses/{id}?stream=true&starting_after=N,
// the Responses API's own way back into a stream (the SDKs'
// responses.retrieve(id, {stream: true, starting_after})): the events
// after sequence number N, all of them without it. Event ids are sequence
// numbers + 1.
func (h *Handler) streamGet(w http.ResponseWriter, r *http.Request, id string) {
	last, err := StartingAfter(r)
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	rc, err := h.env.Streams.OpenAfter(r, id, last, ours)
	h.reconnect(w, rc, err)
}

// StartingAfter is the event id after which GET ...?stream=true resumes:
// starting_after's sequence number + 1, 0 (the whole stream) without it.
func StartingAfter(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("starting_after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, stream.InvalidParam("starting_after", "starting_after must be an event's sequence_number, got %q", v)
	}
	return n + 1, nil
}

func ours(s httpedge.Resumable) bool { _, ok := s.(*streamState); return ok }

// reconnect replays and continues the stream rc holds (see resume).
func (h *Handler) reconnect(w http.ResponseWriter, rc *httpedge.Reconnect, err error) {
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	defer rc.Release()
	st := rc.State.(*streamState)
	gen, ctx, err := h.env.Continue(rc, st.done, st.p.gen, st.req, st.ts.IDs())
	if err != nil {
		h.env.WriteError(w, err)
		return
	}
	httpedge.SetHeaders(w, map[string]string{httpedge.StreamIDHeader: st.ID})
	st.em.sse = h.env.Replay(ctx, w, rc)
	switch {
	case gen != nil:
		h.pump(st, gen)
	case !st.done: // every token was produced before the cut: only the ending is missing
		h.end(st, st.tools.EndProduced(st.ts, &st.em))
	}
}
