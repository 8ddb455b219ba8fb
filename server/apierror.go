package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/engine"
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

// Errors the server itself detects. Engine errors are in engine/api.go.
var (
	// ErrModelNotFound: the request names a model this server does not serve (404).
	ErrModelNotFound = errors.New("server: model not found")
	// ErrBodyTooLarge: the request body is over Config.MaxBodyBytes (413).
	ErrBodyTooLarge = errors.New("server: request body too large")
	// ErrUnauthorized: the API key is missing or wrong (401).
	ErrUnauthorized = errors.New("server: invalid api key")
	// ErrStreamNotFound: a resume names a stream that is unknown or expired (404).
	ErrStreamNotFound = errors.New("server: stream not found")
	// ErrResumeGap: the events after Last-Event-ID are no longer retained (409).
	ErrResumeGap = errors.New("server: events after Last-Event-ID no longer retained")
	// ErrStall: no token arrived within Config.StallTimeout (in-band).
	ErrStall = errors.New("server: generation stalled")
	// ErrShutdown: the server stopped before the stream finished (in-band, or 503).
	ErrShutdown = errors.New("server: shutting down")
)

// errorTable maps every sentinel error to its HTTP status and OpenAI type and
// code. The gRPC endpoint maps the same sentinels to its own codes.
var errorTable = []struct {
	err    error
	status int
	typ    string
	code   string
}{
	{engine.ErrInvalidRequest, http.StatusBadRequest, "invalid_request_error", "invalid_value"},
	{engine.ErrPromptTooLong, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"},
	{engine.ErrQueueFull, http.StatusTooManyRequests, "rate_limit_error", "queue_full"},
	{engine.ErrClosed, http.StatusServiceUnavailable, "server_error", "engine_closed"},
	{ErrModelNotFound, http.StatusNotFound, "invalid_request_error", "model_not_found"},
	{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large"},
	{ErrUnauthorized, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key"},
	{ErrStreamNotFound, http.StatusNotFound, "invalid_request_error", "stream_not_found"},
	{ErrResumeGap, http.StatusConflict, "invalid_request_error", "resume_gap"},
	{ErrStall, http.StatusGatewayTimeout, "server_error", "stall_timeout"},
	{ErrShutdown, http.StatusServiceUnavailable, "server_error", "server_shutdown"},
}

// toAPIError turns any error into an APIError: an *APIError passes through,
// a sentinel (possibly wrapped) takes its row of errorTable, anything else is
// a 500. The message keeps the wrapped context.
func toAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			code := row.code
			return &APIError{Status: row.status, Message: err.Error(), Type: row.typ, Code: &code}
		}
	}
	code := "internal_error"
	return &APIError{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error", Code: &code}
}

// invalidParam is a 400 naming the offending request field.
func invalidParam(param, format string, args ...any) *APIError {
	code := "invalid_value"
	return &APIError{
		Status:  http.StatusBadRequest,
		Message: fmt.Sprintf(format, args...),
		Type:    "invalid_request_error",
		Param:   &param,
		Code:    &code,
	}
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
