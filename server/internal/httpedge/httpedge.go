// Package httpedge is the HTTP driver every API runs on (driver.go: an API
// is a parser and a framer; Env.Serve reads, prepares, starts, pumps and
// ends a response, and resumes it, whether the local engine or an upstream
// generates it), with what they share besides: the server
// facilities they are given (Env), body reading, JSON decode errors that
// name the field, the SSE writer and the retained streams. Nothing here
// knows a wire shape.
package httpedge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/server/stream"
)

// Env is what the HTTP server lends an adapter. Every field is read-only
// after construction; Backend is safe to call from any goroutine.
type Env struct {
	// Backend is the loaded model, nil while it loads. Backend,
	// CheckModel and ModelName are all nil in relay mode: there is no local
	// model, and every API's parser brings an upstream as its Source.
	Backend func() *stream.Backend
	// CheckModel accepts "" (the first served name), the model id and its
	// aliases; anything else wraps stream.ErrModelNotFound.
	CheckModel func(name string) error
	// ModelName is the name a response reports for the requested one.
	ModelName func(requested string) string
	// Pump is the streaming writer's timing (flush, keep-alive, stall); a
	// non-streaming response uses only its stall timeout.
	Pump stream.PumpConfig
	// Drain is closed when open streams must end (the shutdown deadline).
	Drain        <-chan struct{}
	MaxBodyBytes int64
	WriteTimeout time.Duration
	// Streams retains streams for a reconnect (retain.go), shared by every
	// HTTP API; nil: resume is off. StreamBytes caps one stream's retained
	// events.
	Streams     *Store
	StreamBytes int
	// WriteError answers an error in OpenAI's shape before the first byte
	// (the server's own writer, so the shape has one definition).
	WriteError func(http.ResponseWriter, error)
}

// PumpConfig is the writer's timing for a streaming or a whole response.
func (e *Env) PumpConfig(streaming bool) stream.PumpConfig {
	if streaming {
		return e.Pump
	}
	return stream.PumpConfig{StallTimeout: e.Pump.StallTimeout}
}

// LoadBackend is the loaded model, or engine.ErrClosed while it loads.
func (e *Env) LoadBackend() (*stream.Backend, error) {
	if b := e.Backend(); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("%w: model still loading", engine.ErrClosed)
}

// ReadBody reads at most limit bytes; a larger body is ErrBodyTooLarge,
// one that stopped arriving (the server's --body-timeout) ErrBodyTimeout.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, fmt.Errorf("%w: over %d bytes", stream.ErrBodyTooLarge, limit)
	}
	if errors.Is(err, stream.ErrBodyTimeout) {
		return nil, err
	}
	if err != nil {
		return nil, stream.InvalidParam("", "reading request body: %v", err)
	}
	return body, nil
}

// Unsupported refuses a field Sluice cannot honour: a 400 with code
// unsupported_parameter naming it, never a silent ignore.
func Unsupported(param, format string, args ...any) *stream.ParamError {
	return &stream.ParamError{Param: param, Message: fmt.Sprintf(format, args...), Sentinel: stream.ErrUnsupported}
}

// Decode unmarshals raw into v; an error names the field (under prefix, for
// an element of a list) and the JSON kinds involved, never a Go type.
func Decode(raw []byte, v any, prefix string) error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		param := strings.Trim(prefix+"."+te.Field, ".")
		what := param
		if what == "" {
			what = "request body"
		}
		return stream.InvalidParam(param, "%s: expected %s, got JSON %s", what, JSONKind(te.Type), te.Value)
	}
	if prefix == "" {
		return stream.InvalidParam("", "request body is not valid JSON: %v", err)
	}
	return stream.InvalidParam(prefix, "%s: %v", prefix, err)
}

// JSONKind names what a Go destination type accepts, in JSON's words, so an
// error never shows a Go type.
func JSONKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "an object"
}

// Present reports whether a raw JSON field was given a value other than null.
func Present(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s != "" && s != "null"
}
