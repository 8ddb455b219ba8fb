package grpcserver

import (
	"errors"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/server/stream"
)

// The sentinels of the requests only this endpoint names by id; their rows
// are in the stream core's one error table with every other.
var (
	// ErrDuplicateID: a request id is already in flight (ALREADY_EXISTS).
	ErrDuplicateID = stream.ErrDuplicateID
	// ErrUnknownID: Abort names no in-flight request (NOT_FOUND).
	ErrUnknownID = stream.ErrUnknownID
	// ErrUnsupported: a request field Sluice cannot honour (INVALID_ARGUMENT).
	ErrUnsupported = stream.ErrUnsupported
	// errAbortRPC is the cancellation cause of a call ended by an Abort RPC.
	errAbortRPC = errors.New("grpc: aborted by request")
)

// classify returns err's gRPC code and the HTTP status the OpenAI API
// answers for it (reported in in-band error messages): a status error keeps
// its code, anything else takes its row of the stream core's table.
func classify(err error) (codes.Code, int) {
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return st.Code(), http.StatusInternalServerError
	}
	c := stream.Classify(err)
	return c.GRPC, c.HTTP
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
	return status.Error(code, err.Error())
}
