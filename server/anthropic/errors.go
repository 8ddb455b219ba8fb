package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice/server/stream"
)

// errorBody is an error in Anthropic's shape,
// {"type":"error","error":{"type":"invalid_request_error","message":"…"}},
// its type taken from err's row of the one error table. The field an
// invalid request names and the OpenAI-style code travel beside the type
// (Anthropic's shape has neither; its SDKs keep the whole object).
func errorBody(err error) []byte {
	c := stream.Classify(err)
	body, _ := json.Marshal(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": c.Anthropic, "message": err.Error(), "code": c.Code, "param": c.Param},
	})
	return body
}

// WriteError sends err as an Anthropic error response; only valid before the
// first byte of the body.
func WriteError(w http.ResponseWriter, err error) {
	c := stream.Classify(err)
	body := errorBody(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(body)))
	if c.HTTP == http.StatusTooManyRequests || c.HTTP == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(c.HTTP)
	_, _ = w.Write(body)
}
