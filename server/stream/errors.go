package stream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/sluicehq/sluice/engine"
)

// Errors the transports detect. Engine errors are in engine/api.go; both
// kinds take their row of the one table below.
var (
	// ErrModelNotFound: the request names a model this server does not serve.
	ErrModelNotFound = errors.New("model not found")
	// ErrBodyTooLarge: the request is over the configured size limit.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrBodyTimeout: the request body did not arrive within --body-timeout.
	ErrBodyTimeout = errors.New("request body timed out")
	// ErrUnauthorized: the API key is missing or wrong.
	ErrUnauthorized = errors.New("invalid api key")
	// ErrStreamNotFound: a resume names a stream that is unknown or expired.
	ErrStreamNotFound = errors.New("stream not found")
	// ErrResumeGap: the events after Last-Event-ID are no longer retained.
	ErrResumeGap = errors.New("events after Last-Event-ID no longer retained")
	// ErrStall: the sequence made no progress within the stall timeout (in-band).
	ErrStall = errors.New("generation stalled")
	// ErrShutdown: the server stopped before the stream finished (in-band, or before it).
	ErrShutdown = errors.New("server shutting down")
	// ErrDuplicateID: a request id is already in flight.
	ErrDuplicateID = errors.New("request id already in flight")
	// ErrUnknownID: an abort names no in-flight request.
	ErrUnknownID = errors.New("no such request in flight")
	// ErrResponseNotFound: a stored response (Responses API) is unknown or expired.
	ErrResponseNotFound = errors.New("response not found")
	// ErrRouteNotFound: no endpoint has that path.
	ErrRouteNotFound = errors.New("no such endpoint")
	// ErrMethodNotAllowed: the endpoint exists but not with that method.
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrUnsupported: a request field Sluice cannot honour (refused, never ignored).
	ErrUnsupported = errors.New("unsupported request field")
	// ErrUpstreamUnavailable (relay mode): the upstream could not be
	// reached or answered 5xx, after every retry.
	ErrUpstreamUnavailable = errors.New("upstream unavailable")
	// ErrUpstreamTimeout (relay mode): connecting or waiting for the
	// upstream's first byte took longer than its timeout.
	ErrUpstreamTimeout = errors.New("upstream timed out")
	// ErrUpstreamTruncated (relay mode): the upstream's stream ended before
	// its end ([DONE], message_stop, response.completed).
	ErrUpstreamTruncated = errors.New("upstream stream truncated")
	// ErrUpstreamMalformed (relay mode): the upstream sent a chunk that is
	// not one of its API's stream events.
	ErrUpstreamMalformed = errors.New("upstream sent a malformed chunk")
	// ErrUpstreamFailed (relay mode): the upstream reported an error inside
	// its stream.
	ErrUpstreamFailed = errors.New("upstream error")
	// errClientGone is the cancellation cause of a stream whose write failed.
	errClientGone = errors.New("client gone")
)

// Class is how every transport reports one error: HTTP status, OpenAI error
// type and code, gRPC code, Anthropic error type. Param names the offending
// request field, when there is one.
type Class struct {
	HTTP int
	Type string
	Code string
	GRPC codes.Code
	// Anthropic is the Messages API's error type for the same error
	// ("invalid_request_error", "overloaded_error"...): Anthropic's SDKs
	// read it from {"type":"error","error":{"type":...}}.
	Anthropic string
	Param     string
}

// table is the one map from sentinel errors to what the transports answer.
// HTTP 499 is nginx's "client closed request": no client sees it, logs do.
var table = []struct {
	err error
	Class
}{
	{engine.ErrInvalidRequest, Class{http.StatusBadRequest, "invalid_request_error", "invalid_value", codes.InvalidArgument, "invalid_request_error", ""}},
	{engine.ErrPromptTooLong, Class{http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", codes.InvalidArgument, "invalid_request_error", ""}},
	{engine.ErrQueueFull, Class{http.StatusTooManyRequests, "rate_limit_error", "queue_full", codes.ResourceExhausted, "rate_limit_error", ""}},
	{engine.ErrClosed, Class{http.StatusServiceUnavailable, "server_error", "engine_closed", codes.Unavailable, "overloaded_error", ""}},
	{engine.ErrBroken, Class{http.StatusServiceUnavailable, "server_error", "backend_broken", codes.Unavailable, "api_error", ""}},
	{engine.ErrStepFailed, Class{http.StatusInternalServerError, "server_error", "step_failed", codes.Internal, "api_error", ""}},
	{ErrModelNotFound, Class{http.StatusNotFound, "invalid_request_error", "model_not_found", codes.NotFound, "not_found_error", ""}},
	{ErrBodyTooLarge, Class{http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large", codes.ResourceExhausted, "request_too_large", ""}},
	{ErrBodyTimeout, Class{http.StatusRequestTimeout, "invalid_request_error", "request_timeout", codes.DeadlineExceeded, "invalid_request_error", ""}},
	{ErrUnauthorized, Class{http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", codes.Unauthenticated, "authentication_error", ""}},
	{ErrStreamNotFound, Class{http.StatusNotFound, "invalid_request_error", "stream_not_found", codes.NotFound, "not_found_error", ""}},
	{ErrResumeGap, Class{http.StatusConflict, "invalid_request_error", "resume_gap", codes.FailedPrecondition, "invalid_request_error", ""}},
	{ErrStall, Class{http.StatusGatewayTimeout, "server_error", "stall_timeout", codes.DeadlineExceeded, "api_error", ""}},
	{ErrShutdown, Class{http.StatusServiceUnavailable, "server_error", "server_shutdown", codes.Unavailable, "overloaded_error", ""}},
	{ErrDuplicateID, Class{http.StatusConflict, "invalid_request_error", "duplicate_request_id", codes.AlreadyExists, "invalid_request_error", ""}},
	{ErrUnknownID, Class{http.StatusNotFound, "invalid_request_error", "request_not_found", codes.NotFound, "not_found_error", ""}},
	{ErrResponseNotFound, Class{http.StatusNotFound, "invalid_request_error", "response_not_found", codes.NotFound, "not_found_error", ""}},
	{ErrRouteNotFound, Class{http.StatusNotFound, "invalid_request_error", "not_found", codes.Unimplemented, "not_found_error", ""}},
	{ErrMethodNotAllowed, Class{http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed", codes.Unimplemented, "invalid_request_error", ""}},
	{ErrUnsupported, Class{http.StatusBadRequest, "invalid_request_error", "unsupported_parameter", codes.InvalidArgument, "invalid_request_error", ""}},
	{ErrUpstreamUnavailable, Class{http.StatusBadGateway, "server_error", "upstream_unavailable", codes.Unavailable, "api_error", ""}},
	{ErrUpstreamTimeout, Class{http.StatusGatewayTimeout, "server_error", "upstream_timeout", codes.DeadlineExceeded, "api_error", ""}},
	{ErrUpstreamTruncated, Class{http.StatusBadGateway, "server_error", "upstream_truncated", codes.Unavailable, "api_error", ""}},
	{ErrUpstreamMalformed, Class{http.StatusBadGateway, "server_error", "upstream_malformed", codes.Internal, "api_error", ""}},
	{ErrUpstreamFailed, Class{http.StatusBadGateway, "server_error", "upstream_error", codes.Internal, "api_error", ""}},
	{context.Canceled, Class{499, "server_error", "cancelled", codes.Canceled, "api_error", ""}},
	{context.DeadlineExceeded, Class{http.StatusGatewayTimeout, "server_error", "deadline_exceeded", codes.DeadlineExceeded, "api_error", ""}},
}

var internal = Class{http.StatusInternalServerError, "server_error", "internal_error", codes.Internal, "api_error", ""}

// Classify returns err's row of the table (the first sentinel it wraps), or
// a 500 / INTERNAL for anything else; a *ParamError adds its field.
func Classify(err error) Class {
	c, _ := lookup(err)
	var pe *ParamError
	if errors.As(err, &pe) {
		c.Param = pe.Param
	}
	return c
}

// lookup is Classify without the field; ok reports whether a row matched.
func lookup(err error) (Class, bool) {
	for _, row := range table {
		if errors.Is(err, row.err) {
			return row.Class, true
		}
	}
	return internal, false
}

// ParamError is an invalid request field: Param names it as the OpenAI
// schema does, with the index of a list element ("messages[0].role"), and
// Message says what is wrong without naming any Go type. It wraps Sentinel
// (engine.ErrInvalidRequest unless set), which decides its row of the table.
type ParamError struct {
	Param    string
	Message  string
	Sentinel error
}

func (e *ParamError) Error() string { return e.Message }

func (e *ParamError) Unwrap() error {
	if e.Sentinel == nil {
		return engine.ErrInvalidRequest
	}
	return e.Sentinel
}

// RenameParams rewrites the chat field names in err's ParamError (pairs of
// old, new, as strings.NewReplacer takes them) in its Param and Message, so
// an API whose fields are rewritten into chat's for the one reader reports
// them under its own names; other errors pass unchanged.
func RenameParams(err error, pairs ...string) error {
	var pe *ParamError
	if !errors.As(err, &pe) {
		return err
	}
	r := strings.NewReplacer(pairs...)
	return &ParamError{Param: r.Replace(pe.Param), Message: r.Replace(pe.Message), Sentinel: pe.Sentinel}
}

// InvalidParam is a 400 / INVALID_ARGUMENT naming the offending field.
func InvalidParam(param, format string, args ...any) *ParamError {
	return &ParamError{Param: param, Message: fmt.Sprintf(format, args...)}
}
