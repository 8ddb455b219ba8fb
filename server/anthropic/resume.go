package anthropic

import (
	"net/http"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/stream"
)

// streamState is a Messages stream kept for a reconnect: the request as
// submitted (seed fixed), the TextStream holding every token consumed, the
// message being built and the emitter, whose writer changes with each
// connection. The holder of Retained's lease owns it.
type streamState struct {
	*httpedge.Retained
	g   *stream.GenRequest
	req engine.Request
	ts  *stream.TextStream
	// tools parses the reply for calls across connections; nil without tools.
	tools *stream.ToolStream
	m     *message
	em    emitter
	done  bool // the log ends with message_stop or error: nothing left to generate
}

// resume replays the events after Last-Event-ID and, when the generation
// was cut short by a disconnect, continues it from the tokens already
// produced (stream.Continue): the client sees one message, generated once.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request, id string) {
	rc, err := h.env.Streams.Open(r, id, func(s httpedge.Resumable) bool { _, ok := s.(*streamState); return ok })
	if err != nil {
		WriteError(w, err)
		return
	}
	defer rc.Release()
	st := rc.State.(*streamState)
	gen, ctx, err := h.env.Continue(rc, st.done, st.g, st.req, st.ts.IDs())
	if err != nil {
		WriteError(w, err)
		return
	}
	httpedge.SetHeaders(w, map[string]string{"request-id": st.m.ID, httpedge.StreamIDHeader: st.m.ID})
	st.em.sse = h.env.Replay(ctx, w, rc)
	switch {
	case gen != nil:
		h.pump(st, gen)
	case !st.done: // every token was produced before the cut: only the ending is missing
		h.end(st, st.tools.EndProduced(st.ts, &st.em))
	}
}
