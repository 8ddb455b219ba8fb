// Package wirefields keeps Sluice's rule that no request field is dropped
// in silence: each endpoint's top-level fields are the ones its wire
// struct declares (Known, by reflection, so a field added there is known
// at once), and a field outside them is refused (Unknown), unless the
// server runs with --lenient-fields, which accepts it and says so. A
// declared field is honoured, refused when it asks for what Sluice cannot
// do, or is one of Hints: fields a published API defines that Sluice
// accepts and cannot act on, listed here, in one place, with the reason.
// The tests of each parser check every declared field against this.
package wirefields

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Known returns the JSON names of the fields of struct type t, those of
// embedded structs included (encoding/json decodes them as top-level
// fields), with extra.
func Known(t reflect.Type, extra ...string) map[string]bool {
	m := map[string]bool{}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() && f.Tag.Get("json") == "" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = true
	}
	for _, e := range extra {
		m[e] = true
	}
	return m
}

// Unknown returns the top-level keys of body that known lacks, sorted; nil
// when body is not a JSON object (its parser reports that, naming the
// problem).
func Unknown(body []byte, known map[string]bool) []string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil
	}
	var out []string
	for k := range fields {
		if !known[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// API names an endpoint family for Hints.
type API string

const (
	Chat        API = "chat"        // /v1/chat/completions and /v1/completions
	Messages    API = "messages"    // /v1/messages and /v1/messages/count_tokens
	Responses   API = "responses"   // /v1/responses
	Tokenize    API = "tokenize"    // /tokenize
	Detokenize  API = "detokenize"  // /detokenize
	Completions API = "completions" // fields only /v1/completions reads
)

// Hint is a field accepted and not acted on, and why that is honest.
type Hint struct {
	API   API
	Field string
	Why   string
}

// Hints are the declared fields no request outcome depends on. Anything
// else a wire struct declares changes the parsed request, or is refused.
// (On /v1/messages/count_tokens, which takes a Messages body, the fields
// that shape only the generation, such as max_tokens, temperature or
// stream, are accepted too: clients count the body they are about to
// send, and no such field can change a count.)
var Hints = []Hint{
	{Chat, "prompt_cache_key", "a prefix-cache key: Sluice's prefix cache reuses every shared prompt prefix without one (cache_salt partitions)"},
	{Chat, "safety_identifier", "an end-user id for the provider's abuse monitoring; Sluice does no monitoring"},
	{Messages, "cache_control", "a request-wide cache breakpoint: the prefix cache reuses every shared prefix without one"},
	{Messages, "service_tier", "auto and standard_only both mean the one queue Sluice has; other values are refused"},
	{Messages, "speed", "standard is the one speed; other values are refused"},
	{Responses, "prompt_cache_key", "as on chat: the prefix cache serves every shared prefix, and Codex sends one key per conversation"},
	{Responses, "client_metadata", "the client's attribution (Codex: installation and session); OpenAI accepts it and echoes nothing"},
	{Responses, "service_tier", "auto and default both mean the one tier Sluice has; other values are refused"},
	{Responses, "truncation", "disabled is what Sluice does (an input over the context is refused); auto is refused"},
}

// IsHint reports whether field of api is one of Hints.
func IsHint(api API, field string) bool {
	return slices.ContainsFunc(Hints, func(h Hint) bool { return h.API == api && h.Field == field })
}
