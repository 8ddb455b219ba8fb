package responses

import (
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/server/stream"
)

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
	h.env.ResumeAfter(w, r, h.api, id, last)
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
