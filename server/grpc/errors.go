package grpcserver

import (
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server"
)

// Errors the gRPC endpoint itself detects.
var (
	// ErrDuplicateID: a request id is already in flight (ALREADY_EXISTS).
	ErrDuplicateID = errors.New("grpc: request id already in flight")
	// ErrUnknownID: Abort names no in-flight request (NOT_FOUND).
	ErrUnknownID = errors.New("grpc: no such request in flight")
	// ErrUnsupported: a request field Sluice cannot honour (INVALID_ARGUMENT).
	ErrUnsupported = errors.New("grpc: unsupported request field")
	// errAbortRPC is the cancellation cause of a call ended by an Abort RPC.
	errAbortRPC = errors.New("grpc: aborted by request")
)

// codeTable maps every sentinel error to its gRPC code and the HTTP status
// the OpenAI API answers for it (reported in in-band error messages). The
// HTTP side's own table is server.errorTable; the rows correspond.
var codeTable = []struct {
	err  error
	code codes.Code
	http int
}{
	{engine.ErrInvalidRequest, codes.InvalidArgument, http.StatusBadRequest},
	{engine.ErrPromptTooLong, codes.InvalidArgument, http.StatusBadRequest},
	{engine.ErrQueueFull, codes.ResourceExhausted, http.StatusTooManyRequests},
	{engine.ErrClosed, codes.Unavailable, http.StatusServiceUnavailable},
	{server.ErrModelNotFound, codes.NotFound, http.StatusNotFound},
	{server.ErrUnauthorized, codes.Unauthenticated, http.StatusUnauthorized},
	{server.ErrStall, codes.DeadlineExceeded, http.StatusGatewayTimeout},
	{server.ErrShutdown, codes.Unavailable, http.StatusServiceUnavailable},
	{ErrDuplicateID, codes.AlreadyExists, http.StatusConflict},
	{ErrUnknownID, codes.NotFound, http.StatusNotFound},
	{ErrUnsupported, codes.InvalidArgument, http.StatusBadRequest},
	{context.Canceled, codes.Canceled, 499},
	{context.DeadlineExceeded, codes.DeadlineExceeded, http.StatusGatewayTimeout},
}

// httpToCode maps the statuses of the HTTP side's *server.APIError (request
// validation) to gRPC codes, following the gRPC HTTP mapping guidance.
var httpToCode = map[int]codes.Code{
	http.StatusBadRequest:            codes.InvalidArgument,
	http.StatusUnauthorized:          codes.Unauthenticated,
	http.StatusNotFound:              codes.NotFound,
	http.StatusConflict:              codes.FailedPrecondition,
	http.StatusRequestEntityTooLarge: codes.ResourceExhausted,
	http.StatusTooManyRequests:       codes.ResourceExhausted,
	http.StatusServiceUnavailable:    codes.Unavailable,
	http.StatusGatewayTimeout:        codes.DeadlineExceeded,
}

// classify returns err's gRPC code and HTTP status; unknown errors are
// INTERNAL / 500.
func classify(err error) (codes.Code, int) {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return st.Code(), http.StatusInternalServerError
	}
	var ae *server.APIError
	if errors.As(err, &ae) {
		if c, ok := httpToCode[ae.Status]; ok {
			return c, ae.Status
		}
		return codes.Internal, ae.Status
	}
	for _, row := range codeTable {
		if errors.Is(err, row.err) {
			return row.code, row.http
		}
	}
	return codes.Internal, http.StatusInternalServerError
}

// toStatus turns any error into a status error carrying its message.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code, _ := classify(err)
	var ae *server.APIError
	if errors.As(err, &ae) {
		return status.Error(code, ae.Message)
	}
	return status.Error(code, err.Error())
}
