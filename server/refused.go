package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/server/internal/httpedge"
)

// unserved lists the request fields of OpenAI's chat and completions schemas,
// and of vLLM's extensions that clients send, which this server does not
// honour: a request that gives one a value that asks for something is
// refused (400 unsupported_parameter naming it) rather than answered as if
// the field had been honoured. Fields in neither list are refused as
// unknown (fields.go). A field wireRequest declares is served, and drops out of the list
// (unservedFields), so the list can only shrink as support lands.
//
// neutral are the values that ask for nothing, spelled as JSON, besides
// null, false, "", {} and [] (false is not neutral for a field whose
// neutral value is true).
var unserved = []struct {
	name    string
	neutral []string
	why     string
}{
	{"audio", nil, "audio output is not supported"},
	{"modalities", []string{`["text"]`}, "only text output is supported"},
	{"prediction", nil, "predicted outputs are not supported"},
	{"web_search_options", nil, "web search is not supported"},
	{"functions", nil, "function calling is not supported yet"},
	{"function_call", []string{`"none"`}, "function calling is not supported yet"},
	{"reasoning_effort", nil, "the model does no extended reasoning"},
	{"verbosity", nil, "verbosity is not supported"},
	{"store", nil, "completions are not stored by this server"},
	{"metadata", nil, "metadata is kept only for stored completions, which this server does not keep"},
	{"service_tier", []string{`"auto"`, `"default"`}, "there is one service tier (default)"},
	{"prompt_cache_retention", nil, "prompt-cache retention is not configurable per request"},
	{"prompt_logprobs", nil, "prompt logprobs are not supported yet"},
	{"suffix", nil, "suffix (fill in the middle) is not supported"},
	{"best_of", []string{"1"}, "best_of is not supported"},
	{"use_beam_search", nil, "beam search is not supported"},
	{"length_penalty", []string{"1", "1.0"}, "length_penalty applies to beam search, which is not supported"},
	{"allowed_token_ids", nil, "allowed_token_ids is not supported"},
	{"bad_words", nil, "bad_words is not supported"},
	{"include_stop_str_in_output", nil, "stop strings are never sent"},
	{"skip_special_tokens", []string{"true"}, "special tokens are always skipped in the output"},
	{"spaces_between_special_tokens", []string{"true"}, "special tokens are always skipped in the output"},
	{"truncate_prompt_tokens", nil, "prompts are never truncated: an over-long one is refused"},
	{"return_tokens_as_token_ids", nil, "tokens are returned as text"},
	{"guided_json", nil, "use response_format"},
	{"guided_regex", nil, "use response_format"},
	{"guided_choice", nil, "use response_format"},
	{"guided_grammar", nil, "use response_format"},
	{"guided_decoding_backend", nil, "use response_format"},
	{"guided_whitespace_pattern", nil, "use response_format"},
	{"chat_template", nil, "a per-request chat template is not supported; the server's applies"},
	{"chat_template_kwargs", nil, "chat_template_kwargs applies to chat messages only"},
	{"add_generation_prompt", []string{"true"}, "the prompt always opens the assistant's turn"},
	{"continue_final_message", nil, "continuing a final assistant message is not supported"},
	{"documents", nil, "documents are not supported"},
	{"priority", []string{"0"}, "per-request priority is not supported"},
	{"logits_processors", nil, "logits processors are not supported"},
	{"mm_processor_kwargs", nil, "there is no multimodal input"},
	{"kv_transfer_params", nil, "KV transfer is not supported"},
	{"vllm_xargs", nil, "vllm_xargs is not supported"},
}

// unservedFields is unserved less what wireRequest declares.
var unservedFields = func() map[string]int {
	declared := map[string]bool{}
	// VisibleFields includes the fields of embedded structs (wireExtensions),
	// which encoding/json decodes as if declared at the top level.
	for _, f := range reflect.VisibleFields(reflect.TypeFor[wireRequest]()) {
		if f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		declared[name] = true
	}
	m := map[string]int{}
	for i, f := range unserved {
		if !declared[f.name] {
			m[f.name] = i
		}
	}
	return m
}()

// refuseUnserved returns the first field of body, in the order of unserved,
// that asks for something this server does not do. add_special_tokens is
// judged against the endpoint's own default (chat: false, the template
// writes any BOS; completions: true).
func refuseUnserved(body []byte, chat bool) error {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil // the typed decode reports it, naming the field
	}
	def := "true"
	if chat {
		def = "false"
	}
	if raw, ok := fields["add_special_tokens"]; ok && !neutral(raw, []string{def}) {
		return httpedge.Unsupported("add_special_tokens", "add_special_tokens %s is not supported on this endpoint", bytes.TrimSpace(raw))
	}
	first := len(unserved)
	for name, raw := range fields {
		if i, ok := unservedFields[name]; ok && i < first && !neutral(raw, unserved[i].neutral) {
			first = i
		}
	}
	if first == len(unserved) {
		return nil
	}
	f := unserved[first]
	return httpedge.Unsupported(f.name, "%s is not supported by this server: %s", f.name, f.why)
}

func neutral(raw json.RawMessage, extra []string) bool {
	var compact bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return false
	}
	v := compact.String()
	if slices.Contains(extra, "true") { // a field whose default is on: off asks for something
		return v == "null" || slices.Contains(extra, v)
	}
	switch v {
	case "null", "false", `""`, "{}", "[]":
		return true
	default:
		return slices.Contains(extra, v)
	}
}
