package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/server/stream"
)

// APIError is an error in OpenAI's shape: {"error":{"message","type","param","code"}}.
// Before the first byte of a response it travels as the body of an HTTP
// error status; after it, in-band as an SSE event.
type APIError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// MarshalJSON wraps the error in OpenAI's {"error": ...} envelope.
func (e *APIError) MarshalJSON() ([]byte, error) {
	type body APIError
	return json.Marshal(struct {
		Error *body `json:"error"`
	}{(*body)(e)})
}

// toAPIError turns any error into an APIError: an *APIError passes through,
// anything else takes its row of the stream core's one error table (a 500
// when it wraps no sentinel). The message keeps the wrapped context; a
// *stream.ParamError names its field.
func toAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	c := stream.Classify(err)
	ae = &APIError{Status: c.HTTP, Message: err.Error(), Type: c.Type, Code: &c.Code}
	var pe *stream.ParamError
	if errors.As(err, &pe) {
		ae.Param = &pe.Param
	}
	return ae
}

// writeError sends err as an HTTP error response. Only valid before the
// first byte of the body.
func writeError(w http.ResponseWriter, err error) {
	ae := toAPIError(err)
	body, _ := json.Marshal(ae) // APIError always marshals
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	if ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(ae.Status)
	_, _ = w.Write(body)
}
