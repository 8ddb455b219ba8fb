package server

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/wirefields"
)

// fieldSample is a value for one chat/completions field, per endpoint: it
// must change the parsed request ("" means the endpoint refuses the field).
// needs are other fields the value takes effect with, in both bodies.
type fieldSample struct {
	chat, cmpl string
	needs      string
}

var chatSamples = map[string]fieldSample{
	"model":                 {chat: `"other"`, cmpl: `"other"`},
	"messages":              {chat: `[{"role":"user","content":"bye"}]`},
	"prompt":                {cmpl: `"bye"`},
	"max_tokens":            {chat: `5`, cmpl: `5`},
	"max_completion_tokens": {chat: `5`, cmpl: `5`},
	"temperature":           {chat: `0.5`, cmpl: `0.5`},
	"top_p":                 {chat: `0.5`, cmpl: `0.5`},
	"top_k":                 {chat: `5`, cmpl: `5`},
	"min_p":                 {chat: `0.1`, cmpl: `0.1`},
	"seed":                  {chat: `7`, cmpl: `7`},
	"stop":                  {chat: `"x"`, cmpl: `"x"`},
	"presence_penalty":      {chat: `0.5`, cmpl: `0.5`},
	"frequency_penalty":     {chat: `0.5`, cmpl: `0.5`},
	"repetition_penalty":    {chat: `1.1`, cmpl: `1.1`},
	"stream":                {chat: `false`, cmpl: `false`},
	"stream_options":        {chat: `{"include_usage":true}`, cmpl: `{"include_usage":true}`},
	"user":                  {chat: `"u"`, cmpl: `"u"`},
	"n":                     {chat: `2`, cmpl: `2`},
	"response_format":       {chat: `{"type":"json_object"}`, cmpl: `{"type":"json_object"}`},
	"structured_outputs":    {chat: `{"regex":"a+"}`, cmpl: `{"regex":"a+"}`},
	"grammar":               {chat: `"root ::= \"a\""`, cmpl: `"root ::= \"a\""`},
	"json_schema":           {chat: `{"type":"object"}`, cmpl: `{"type":"object"}`},
	"tools":                 {chat: `[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`},
	"tool_choice":           {chat: `"none"`, needs: `"tools":[{"type":"function","function":{"name":"f"}}]`},
	"parallel_tool_calls":   {chat: `false`, needs: `"tools":[{"type":"function","function":{"name":"f"}}]`},
	"logprobs":              {chat: `true`, cmpl: `2`},
	"top_logprobs":          {chat: `2`, needs: `"logprobs":true`},
	"logit_bias":            {chat: `{"5":1}`, cmpl: `{"5":1}`},
	"min_tokens":            {chat: `2`, cmpl: `2`},
	"ignore_eos":            {chat: `true`, cmpl: `true`},
	"stop_token_ids":        {chat: `[5]`, cmpl: `[5]`},
	"echo":                  {cmpl: `true`},
	"allow_special_tokens":  {chat: `true`},
	"cache_salt":            {chat: `"s"`, cmpl: `"s"`},
	"reasoning_effort":      {chat: `"low"`},
	"chat_template_kwargs":  {chat: `{"enable_thinking":false}`},
	"add_special_tokens":    {},
	// vLLM's prompt extensions (request_ext.go), once declared.
	"prompt_logprobs":        {chat: `1`, cmpl: `1`, needs: `"stream":false`}, // vLLM refuses them on a stream
	"truncate_prompt_tokens": {chat: `1`, cmpl: `1`},
	"add_generation_prompt":  {chat: `false`},
	"continue_final_message": {chat: `true`, needs: `"add_generation_prompt":false,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"He"}]`}, // continues the assistant's
}

// TestChatFieldsNotDropped walks every top-level field a chat or
// completions body may have (wireRequest by reflection, its embedded
// extensions included, and the unserved list) and proves none is dropped
// in silence: on each endpoint a body with the field parses to a
// different request than the same body without it, or is refused naming
// it, or the field is one of wirefields.Hints. A field added to
// wireRequest and not acted on fails here until it is, or is listed as a
// hint with its reason.
func TestChatFieldsNotDropped(t *testing.T) {
	unservedName := map[string]bool{}
	for _, u := range unserved {
		unservedName[u.name] = true
	}
	declared := wirefields.Known(reflect.TypeFor[wireRequest]())
	for name := range chatFields() {
		for _, chat := range []bool{true, false} {
			base := `"model":"m","stream":true,`
			if chat {
				base += `"messages":[{"role":"user","content":"hi"}]`
			} else {
				base += `"prompt":"hi"`
			}
			// A field of the base body (model, stream, the input) is
			// replaced by its sample value.
			s, sampled := chatSamples[name]
			// A field refused on this endpoint, or unserved, is refused
			// whatever else the body asks for, so it is tried without the
			// fields its sample needs (which may be unserved themselves).
			if _, served := s.fieldFor(chat); served && s.needs != "" && (declared[name] || !unservedName[name]) {
				base += "," + s.needs
			}
			without := "{" + base + "}"
			g0, err := ParseRequest([]byte(without), chat)
			if err != nil {
				t.Fatalf("%s without it: %v", name, err)
			}
			if wirefields.IsHint(wirefields.Chat, name) {
				continue
			}
			var value string
			switch {
			case unservedName[name] && !declared[name]:
				value = nonNeutral(name)
			case !sampled:
				t.Errorf("%s: no sample value in chatSamples: add one that changes the parsed request, or list the field in wirefields.Hints", name)
				continue
			default:
				value, _ = s.fieldFor(chat)
			}
			with := setField(t, without, name, value)
			g1, err := ParseRequest([]byte(with), chat)
			refused := err != nil
			if refused {
				var ae *APIError
				if !asAPIError(err, &ae) || ae.Param == nil || !strings.HasPrefix(*ae.Param, name) {
					t.Errorf("%s (chat %v): refused as %v, not naming the field", name, chat, err)
				}
			}
			wantRefused := value == `"-"` || (unservedName[name] && !declared[name]) || name == "add_special_tokens"
			switch {
			case wantRefused && !refused:
				t.Errorf("%s=%s (chat %v): accepted, want refused", name, value, chat)
			case !wantRefused && refused:
				t.Errorf("%s=%s (chat %v): refused (%v), want honoured", name, value, chat, err)
			case !refused && reflect.DeepEqual(g0, g1):
				t.Errorf("%s=%s (chat %v): the parsed request is the same as without it: the field is dropped", name, value, chat)
			}
		}
	}
}

// fieldFor is the sample for one endpoint; `"-"` stands for "refused".
func (s fieldSample) fieldFor(chat bool) (string, bool) {
	v := s.cmpl
	if chat {
		v = s.chat
	}
	if v == "" {
		return `"-"`, false
	}
	return v, true
}

// nonNeutral is a value of an unserved field that asks for something.
func nonNeutral(name string) string {
	i := slices.IndexFunc(unserved, func(u struct {
		name    string
		neutral []string
		why     string
	}) bool {
		return u.name == name
	})
	for _, v := range []string{`"x"`, `true`, `2`, `{"a":1}`, `[1]`} {
		if !neutral(json.RawMessage(v), unserved[i].neutral) {
			return v
		}
	}
	return `"x"`
}

// setField sets name to value in the JSON object body.
func setField(t *testing.T, body, name, value string) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	if name == "add_special_tokens" {
		// Each endpoint's non-default value.
		value = `true`
		if _, chat := m["messages"]; !chat {
			value = `false`
		}
	}
	m[name] = json.RawMessage(value)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func asAPIError(err error, ae **APIError) bool {
	e, ok := err.(*APIError)
	*ae = e
	return ok
}

// An unknown field is refused on every endpoint that takes a JSON body,
// in the endpoint's error shape and naming the field, before the model
// sees anything; --lenient-fields serves the request and lists the
// fields in Sluice-Ignored-Fields.
func TestUnknownFieldRefused(t *testing.T) {
	bodies := []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n_predict":5,"cache_prompt":true}`},
		{"/v1/completions", `{"prompt":"hi","n_predict":5,"cache_prompt":true}`},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"n_predict":5,"cache_prompt":true}`},
		{"/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"hi"}],"n_predict":5,"cache_prompt":true}`},
		{"/v1/responses", `{"input":"hi","n_predict":5,"cache_prompt":true}`},
		{"/tokenize", `{"prompt":"hi","n_predict":5,"cache_prompt":true}`},
		{"/detokenize", `{"tokens":[1],"n_predict":5,"cache_prompt":true}`},
	}
	strict := newRig(t, []string{"a"}, 0, nil)
	lenient := newRig(t, []string{"a"}, 0, func(c *Config) { c.LenientFields = true })
	for _, b := range bodies {
		resp := strict.post(t, b.path, b.body)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Type  string
			Error struct{ Type, Param, Message string }
		}
		_ = json.Unmarshal(raw, &e)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error.Message, `"cache_prompt" "n_predict"`) {
			t.Errorf("%s: %d %s, want 400 naming cache_prompt and n_predict", b.path, resp.StatusCode, raw)
		}
		if strings.HasPrefix(b.path, "/v1/messages") {
			if e.Type != "error" || e.Error.Type != "invalid_request_error" {
				t.Errorf("%s: %s is not Anthropic's error shape", b.path, raw)
			}
		} else if e.Error.Param != "cache_prompt" || e.Error.Type != "invalid_request_error" {
			t.Errorf("%s: %s, want OpenAI's error with param cache_prompt", b.path, raw)
		}
		if n := len(strict.eng.Submits()); n != 0 {
			t.Fatalf("%s: %d submits after a refusal", b.path, n)
		}
		resp = lenient.post(t, b.path, b.body)
		raw, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get(IgnoredFieldsHeader) != "cache_prompt,n_predict" {
			t.Errorf("lenient %s: %d %s=%q %s, want 200 listing cache_prompt,n_predict", b.path, resp.StatusCode, IgnoredFieldsHeader, resp.Header.Get(IgnoredFieldsHeader), raw)
		}
	}
	// A body with only known fields has no header, lenient or not.
	resp := lenient.post(t, "/v1/completions", `{"prompt":"hi","stream":false}`)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(IgnoredFieldsHeader) != "" {
		t.Errorf("known fields only: %d %q", resp.StatusCode, resp.Header.Get(IgnoredFieldsHeader))
	}
}

// The render routes refuse an unknown field too, behind the key check or
// public (serve --render-public, which skips the guard).
func TestUnknownFieldRefusedRender(t *testing.T) {
	for _, public := range []bool{false, true} {
		h := renderServerWith(t, func(c *Config) { c.RenderPublic = public })
		for _, c := range []struct{ path, body string }{
			{"/v1/chat/completions/render", `{"messages":[{"role":"user","content":"hi"}],"n_predict":3}`},
			{"/v1/completions/render", `{"prompt":"hi","n_predict":3}`},
		} {
			code, body := post(h, c.path, c.body)
			if code != http.StatusBadRequest || !strings.Contains(body, `"param":"n_predict"`) {
				t.Errorf("public %v %s: %d %s, want 400 naming n_predict", public, c.path, code, body)
			}
		}
	}
}
