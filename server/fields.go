package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/server/anthropic"
	"github.com/sluicehq/sluice/server/internal/httpedge"
	"github.com/sluicehq/sluice/server/internal/wirefields"
	"github.com/sluicehq/sluice/server/responses"
	"github.com/sluicehq/sluice/server/stream"
)

// IgnoredFieldsHeader lists, under --lenient-fields, the top-level fields
// of the request body that the server accepted without acting on them.
const IgnoredFieldsHeader = "Sluice-Ignored-Fields"

// chatFields are the fields of a chat or completions body: what
// wireRequest declares, the unserved ones (refused with their own
// reason), and add_special_tokens (judged per endpoint).
func chatFields() map[string]bool {
	extra := []string{"add_special_tokens"}
	for _, u := range unserved {
		extra = append(extra, u.name)
	}
	return wirefields.Known(reflect.TypeFor[wireRequest](), extra...)
}

// routeFields maps each route that takes a JSON body to its known fields.
var routeFields = func() map[string]map[string]bool {
	chat := chatFields()
	msgs := anthropic.KnownFields()
	return map[string]map[string]bool{
		"POST /v1/chat/completions":      chat,
		"POST /v1/completions":           chat,
		ChatRenderRoute:                  chat,
		CompletionRenderRoute:            chat,
		"POST /v1/messages":              msgs,
		"POST /v1/messages/count_tokens": msgs,
		"POST /v1/responses":             responses.KnownFields(),
		"POST /tokenize":                 wirefields.Known(reflect.TypeFor[tokenizeRequest]()),
		"POST /detokenize":               {"model": true, "tokens": true}, // handleDetokenize's body
	}
}()

// checkFields refuses a body with a field its route does not know (400,
// param the first such field, in the route's error shape), before the
// handler reads it; with --lenient-fields it serves the request and lists
// the fields in IgnoredFieldsHeader and the log instead. It reports
// whether the handler should run; the body is left for it to read again.
func (s *Server) checkFields(w http.ResponseWriter, r *http.Request, refuse func(http.ResponseWriter, error)) bool {
	known, ok := routeFields[r.Pattern]
	if !ok || s.relay != nil {
		// A relay forwards the client's body whole: a field this server does
		// not know reaches the upstream, which honours or refuses it.
		return true
	}
	body, err := httpedge.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		refuse(w, err)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	unknown := wirefields.Unknown(body, known)
	if len(unknown) == 0 {
		return true
	}
	if s.cfg.LenientFields {
		w.Header().Set(IgnoredFieldsHeader, strings.Join(unknown, ","))
		s.log.Info("request fields ignored (--lenient-fields)", "route", r.Pattern, "fields", unknown)
		return true
	}
	what := fmt.Sprintf("unknown field %q", unknown[0])
	if len(unknown) > 1 {
		what = fmt.Sprintf("unknown fields %q", unknown)
	}
	refuse(w, stream.InvalidParam(unknown[0], "%s: this server does not recognize it, and refuses rather than ignore it (serve --lenient-fields accepts unknown fields and lists them in the %s response header)", what, IgnoredFieldsHeader))
	return false
}
