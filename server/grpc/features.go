package grpcserver

import (
	"encoding/json"
	"fmt"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/stream"
)

// Tools, structured outputs and logprobs over gRPC. The proto's messages are
// written in the OpenAI wire shape and read by the stream core's own readers
// (SetTools, SetResponseFormat, SetStructuredOutputs, ParseToolCalls), so
// a value is valid over gRPC exactly when it is over HTTP, with the same
// message, and no rule has a second copy here. Schemas travel as JSON text
// in the proto; text that is not JSON is refused naming its field.

// setFeatures reads r's tools, output constraint and logprobs into g.
func setFeatures(g *stream.GenRequest, r *sluicev1.GenerateRequest) error {
	if err := setTools(g, r); err != nil {
		return err
	}
	if err := setResponseFormat(g, r.GetResponseFormat()); err != nil {
		return err
	}
	if err := setStructuredOutputs(g, r.GetStructuredOutputs()); err != nil {
		return err
	}
	return nil
}

func setTools(g *stream.GenRequest, r *sluicev1.GenerateRequest) error {
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      bool            `json:"strict,omitempty"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	var tools json.RawMessage
	if len(r.GetTools()) > 0 {
		list := make([]tool, len(r.GetTools()))
		for i, t := range r.GetTools() {
			params, err := jsonText(fmt.Sprintf("tools[%d].parameters_json", i), t.GetParametersJson())
			if err != nil {
				return err
			}
			list[i] = tool{Type: "function", Function: function{Name: t.GetName(), Description: t.GetDescription(),
				Parameters: params, Strict: t.GetStrict()}}
		}
		tools = mustJSON(list)
	}
	var choice json.RawMessage
	switch c := r.GetToolChoice().GetChoice().(type) {
	case *sluicev1.ToolChoice_Mode:
		choice = mustJSON(c.Mode)
	case *sluicev1.ToolChoice_Function:
		choice = mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": c.Function}})
	}
	if err := g.SetTools(tools, choice, r.ParallelToolCalls); err != nil {
		return err
	}
	if g.Tools.List != nil && !g.Chat {
		return stream.InvalidParam("tools", "tools need chat input: the calls are rendered through the chat template")
	}
	return nil
}

func setResponseFormat(g *stream.GenRequest, rf *sluicev1.ResponseFormat) error {
	var v any
	switch f := rf.GetFormat().(type) {
	case nil:
		return nil
	case *sluicev1.ResponseFormat_JsonObject:
		v = map[string]string{"type": "json_object"}
	case *sluicev1.ResponseFormat_JsonSchema:
		js := f.JsonSchema
		schema, err := jsonText("response_format.json_schema.schema_json", js.GetSchemaJson())
		if err != nil {
			return err
		}
		type jsonSchema struct {
			Name        string          `json:"name"`
			Description string          `json:"description,omitempty"`
			Schema      json.RawMessage `json:"schema,omitempty"`
			Strict      *bool           `json:"strict,omitempty"`
		}
		v = map[string]any{"type": "json_schema", "json_schema": jsonSchema{Name: js.GetName(),
			Description: js.GetDescription(), Schema: schema, Strict: js.Strict}}
	}
	return g.SetResponseFormat(mustJSON(v))
}

func setStructuredOutputs(g *stream.GenRequest, so *sluicev1.StructuredOutputs) error {
	var v map[string]any
	switch c := so.GetConstraint().(type) {
	case nil:
		return nil
	case *sluicev1.StructuredOutputs_Json:
		schema, err := jsonText("structured_outputs.json", c.Json)
		if err != nil {
			return err
		}
		if schema == nil {
			return stream.InvalidParam("structured_outputs.json", "structured_outputs.json must be a JSON Schema")
		}
		v = map[string]any{"json": schema}
	case *sluicev1.StructuredOutputs_Regex:
		v = map[string]any{"regex": c.Regex}
	case *sluicev1.StructuredOutputs_Choice:
		choices := c.Choice.GetChoices()
		if choices == nil {
			choices = []string{} // the reader refuses an empty list, not an absent one
		}
		v = map[string]any{"choice": choices}
	case *sluicev1.StructuredOutputs_Grammar:
		v = map[string]any{"grammar": c.Grammar}
	case *sluicev1.StructuredOutputs_JsonObject:
		v = map[string]any{"json_object": c.JsonObject}
	}
	return g.SetStructuredOutputs(mustJSON(v))
}

// toolCalls reads an assistant message's calls (param names the field).
func toolCalls(param string, in []*sluicev1.ToolCall) ([]stream.ToolCall, error) {
	if len(in) == 0 {
		return nil, nil
	}
	list := make([]stream.WireToolCall, len(in))
	for i, c := range in {
		list[i].ID, list[i].Type = c.GetId(), "function"
		list[i].Function.Name, list[i].Function.Arguments = c.GetName(), c.GetArguments()
	}
	return stream.ParseToolCalls(param, mustJSON(list))
}

// jsonText is a proto string field holding JSON; "" is absent (nil).
func jsonText(param, s string) (json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	if !json.Valid([]byte(s)) {
		return nil, stream.InvalidParam(param, "%s is not valid JSON", param)
	}
	return json.RawMessage(s), nil
}

// mustJSON marshals what this file builds: strings, bools, maps, slices
// and RawMessages already checked to be valid, which always marshal.
func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
