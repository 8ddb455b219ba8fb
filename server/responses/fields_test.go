package responses

import (
	"encoding/json"
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
var responsesSamples = map[string]struct{ value, needs string }{
	"model":                  {value: `"other"`},
	"input":                  {value: `"bye"`},
	"instructions":           {value: `"be brief"`},
	"max_output_tokens":      {value: `20`},
	"temperature":            {value: `0.5`},
	"top_p":                  {value: `0.5`},
	"stream":                 {value: `true`},
	"store":                  {value: `false`},
	"previous_response_id":   {value: `"resp_1"`},
	"metadata":               {value: `{"k":"v"}`},
	"user":                   {value: `"u"`},
	"safety_identifier":      {value: `"s"`},
	"reasoning":              {value: `{"effort":"low"}`},
	"parallel_tool_calls":    {value: `false`, needs: `"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]`},
	"tool_choice":            {value: `"required"`, needs: `"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]`},
	"tools":                  {value: `[{"type":"function","name":"f","parameters":{"type":"object"}}]`},
	"include":                {value: `["reasoning.encrypted_content"]`},
	"top_logprobs":           {value: `!2`},
	"background":             {value: `!true`},
	"stream_options":         {value: `!{"include_obfuscation":true}`},
	"text":                   {value: `{"format":{"type":"json_object"}}`},
	"access_programs":        {value: `![1]`},
	"background_options":     {value: `!{"a":1}`},
	"context_management":     {value: `![{"type":"compaction"}]`},
	"conversation":           {value: `!"conv_1"`},
	"image":                  {value: `!{"a":1}`},
	"max_tool_calls":         {value: `!3`},
	"moderation":             {value: `!{"a":1}`},
	"prompt":                 {value: `!{"id":"p"}`},
	"prompt_cache_options":   {value: `!{"a":1}`},
	"prompt_cache_retention": {value: `!"24h"`},
	"allow_special_tokens":   {value: `true`},
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
	for name := range KnownFields() {
		if wirefields.IsHint(wirefields.Responses, name) {
			continue
		}
		s, ok := responsesSamples[name]
		if !ok {
			t.Errorf("%s: no sample value: add one that changes the parsed request, or list the field in wirefields.Hints", name)
			continue
		}
		base := `"model":"m","input":"hi"`
		if s.needs != "" {
			base += "," + s.needs
		}
		without := "{" + base + "}"
		p0, err := parse([]byte(without), history)
		if err != nil {
			t.Fatalf("%s without it: %v", name, err)
		}
		value, wantRefused := strings.CutPrefix(s.value, "!")
		var m map[string]json.RawMessage
		_ = json.Unmarshal([]byte(without), &m)
		m[name] = json.RawMessage(value)
		with, _ := json.Marshal(m)
		p1, err := parse(with, history)
		var pe *stream.ParamError
		switch {
		case wantRefused && (!errors.As(err, &pe) || !strings.HasPrefix(pe.Param, name)):
			t.Errorf("%s=%s: %v, want refused naming it", name, value, err)
		case wantRefused:
		case err != nil:
			t.Errorf("%s=%s: refused (%v), want honoured", name, value, err)
		case echoed[name]:
			if reflect.DeepEqual(p0.wire, p1.wire) {
				t.Errorf("%s=%s: not in the parsed wire Create reads", name, value)
			}
		case reflect.DeepEqual(p0.gen, p1.gen) && reflect.DeepEqual(p0.conv, p1.conv) && reflect.DeepEqual(p0.tools, p1.tools):
			t.Errorf("%s=%s: the parsed request is the same as without it: the field is dropped", name, value)
		}
	}
}
