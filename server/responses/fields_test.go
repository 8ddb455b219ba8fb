package responses

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/internal/wirefields"
	"github.com/sluicehq/sluice/server/stream"
)

// responsesSamples give each Responses field a value that must change the
// parsed request, or, as "!" + value, one that must be refused naming it.
// Fields Create honours after parsing (stores, echoes) are marked "echo":
// their value must reach the response through the parsed wire.
var responsesSamples = map[string]wirefields.Sample{
	"model":                  {Value: `"other"`},
	"input":                  {Value: `"bye"`},
	"instructions":           {Value: `"be brief"`},
	"max_output_tokens":      {Value: `20`},
	"temperature":            {Value: `0.5`},
	"top_p":                  {Value: `0.5`},
	"stream":                 {Value: `true`},
	"store":                  {Value: `false`},
	"previous_response_id":   {Value: `"resp_1"`},
	"metadata":               {Value: `{"k":"v"}`},
	"user":                   {Value: `"u"`},
	"safety_identifier":      {Value: `"s"`},
	"reasoning":              {Value: `{"effort":"low"}`},
	"parallel_tool_calls":    {Value: `false`, Needs: `"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]`},
	"tool_choice":            {Value: `"required"`, Needs: `"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]`},
	"tools":                  {Value: `[{"type":"function","name":"f","parameters":{"type":"object"}}]`},
	"include":                {Value: `["reasoning.encrypted_content"]`},
	"top_logprobs":           {Value: `!2`},
	"background":             {Value: `!true`},
	"stream_options":         {Value: `!{"include_obfuscation":true}`},
	"text":                   {Value: `{"format":{"type":"json_object"}}`},
	"access_programs":        {Value: `![1]`},
	"background_options":     {Value: `!{"a":1}`},
	"context_management":     {Value: `![{"type":"compaction"}]`},
	"conversation":           {Value: `!"conv_1"`},
	"image":                  {Value: `!{"a":1}`},
	"max_tool_calls":         {Value: `!3`},
	"moderation":             {Value: `!{"a":1}`},
	"prompt":                 {Value: `!{"id":"p"}`},
	"prompt_cache_options":   {Value: `!{"a":1}`},
	"prompt_cache_retention": {Value: `!"24h"`},
	"allow_special_tokens":   {Value: `true`},
}

// echoed are the fields Create acts on after parsing, from the parsed
// wire: what it stores and what the response object carries back.
var echoed = map[string]bool{"store": true, "metadata": true, "include": true}

// TestResponsesFieldsNotDropped walks every top-level field of a
// Responses body (wireRequest by reflection) and proves none is dropped
// in silence: a body with the field parses to a different generation or
// conversation than without it (or, for the fields Create reads from the
// parsed wire, a different wire), or is refused naming it, or the field
// is one of wirefields.Hints.
func TestResponsesFieldsNotDropped(t *testing.T) {
	history := func(id string) ([]stream.ChatMessage, bool) {
		return []stream.ChatMessage{{Role: "user", Content: "before"}, {Role: "assistant", Content: "ok"}}, id == "resp_1"
	}
	cases, missing := wirefields.Walk(wirefields.Responses, KnownFields(), responsesSamples, `"model":"m","input":"hi"`)
	for _, name := range missing {
		t.Errorf("%s: no sample value: add one that changes the parsed request, or list the field in wirefields.Hints", name)
	}
	for _, c := range cases {
		p0, err := parse(c.Without, history)
		if err != nil {
			t.Fatalf("%s without it: %v", c.Name, err)
		}
		p1, err := parse(c.With, history)
		var pe *stream.ParamError
		switch {
		case c.Refused && (!errors.As(err, &pe) || !strings.HasPrefix(pe.Param, c.Name)):
			t.Errorf("%s=%s: %v, want refused naming it", c.Name, c.Value, err)
		case c.Refused:
		case err != nil:
			t.Errorf("%s=%s: refused (%v), want honoured", c.Name, c.Value, err)
		case echoed[c.Name]:
			if reflect.DeepEqual(p0.wire, p1.wire) {
				t.Errorf("%s=%s: not in the parsed wire Create reads", c.Name, c.Value)
			}
		case reflect.DeepEqual(p0.gen, p1.gen) && reflect.DeepEqual(p0.conv, p1.conv) && reflect.DeepEqual(p0.tools, p1.tools):
			t.Errorf("%s=%s: the parsed request is the same as without it: the field is dropped", c.Name, c.Value)
		}
	}
}
