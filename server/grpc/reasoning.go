package grpcserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"google.golang.org/protobuf/types/known/structpb"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
	"github.com/sluicehq/sluice/server/stream"
)

// kwargsParam is the wire name of Chat.chat_template_kwargs in errors: the
// HTTP API's, so a refused key is named alike on both.
const kwargsParam = "chat_template_kwargs"

// setTemplateKwargs gives g a chat's chat_template_kwargs by the HTTP
// API's rules (stream.GenRequest.SetTemplateKwargs: reserved names, limits)
// and returns them as the JSON the reasoning reads. Each Struct value is
// turned into the JSON text HTTP would have received; one JSON cannot
// hold (NaN, an infinity, a Value with no kind, at any depth) is refused
// by its key rather than sent as protobuf's JSON mapping would ("NaN" as
// a string), which no HTTP client could have sent.
func setTemplateKwargs(g *stream.GenRequest, kw *structpb.Struct) (map[string]json.RawMessage, error) {
	fields := kw.GetFields()
	if len(fields) == 0 {
		return nil, nil
	}
	// Counted before converting, so a huge map is refused without the work;
	// SetTemplateKwargs applies the same limit with the same message.
	if len(fields) > stream.MaxTemplateKwargs {
		return nil, stream.InvalidParam(kwargsParam, "%s has at most %d keys, got %d", kwargsParam, stream.MaxTemplateKwargs, len(fields))
	}
	raw := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		p := kwargsParam + "." + k
		val, err := jsonValue(v)
		if err != nil {
			return nil, stream.InvalidParam(p, "%s has no JSON form: %v", p, err)
		}
		// Without HTML escaping: < as \u003c would count six bytes of the
		// 64 KiB where an HTTP client's body has one.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(val); err != nil {
			return nil, stream.InvalidParam(p, "%s has no JSON form: %v", p, err)
		}
		raw[k] = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	}
	return raw, g.SetTemplateKwargs(kwargsParam, raw)
}

// jsonValue is v as encoding/json's values. Recursion is bounded by the
// protobuf decoder's nesting limit.
func jsonValue(v *structpb.Value) (any, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return nil, nil
	case *structpb.Value_BoolValue:
		return k.BoolValue, nil
	case *structpb.Value_StringValue:
		return k.StringValue, nil
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return nil, fmt.Errorf("the number %v", k.NumberValue)
		}
		return k.NumberValue, nil
	case *structpb.Value_ListValue:
		out := make([]any, len(k.ListValue.GetValues()))
		for i, e := range k.ListValue.GetValues() {
			var err error
			if out[i], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *structpb.Value_StructValue:
		out := make(map[string]any, len(k.StructValue.GetFields()))
		for name, e := range k.StructValue.GetFields() {
			var err error
			if out[name], err = jsonValue(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("a Value with none of its kinds set")
}

// setReasoning reads GenerateRequest.reasoning and the reasoning a chat's
// kwargs ask for (enable_thinking, reasoning_effort: stream.KwargsReasoning,
// as the HTTP API reads them) into the stream core's reasoning controls
// (stream.SetReasoning, the one reader every HTTP API uses), so an effort
// or budget is valid here exactly when it is there, with the same message
// under this API's field names.
func setReasoning(g *stream.GenRequest, rs *sluicev1.Reasoning, kwargs map[string]json.RawMessage) error {
	if rs == nil && len(kwargs) == 0 {
		return nil
	}
	// A text or token-id prompt goes to the model as written and its reply
	// is not split into reasoning, as HTTP completions refuse reasoning_effort.
	// (Kwargs come only with chat input: they are a field of Chat.)
	if !g.Chat {
		return stream.InvalidParam("reasoning", "reasoning needs chat input: a text or token_ids prompt is sent as written")
	}
	ask := stream.ReasoningAsk{EnabledParam: "reasoning.enabled", EffortParam: "reasoning.effort", BudgetParam: "reasoning.budget_tokens"}
	if rs != nil {
		ask.Enabled, ask.Effort = rs.Enabled, rs.Effort
		if rs.BudgetTokens != nil {
			// Clamped past int32 so that a huge value is reported as out of
			// range rather than wrapping on 32-bit ints.
			n := int(min(rs.GetBudgetTokens(), 1<<31-1))
			ask.Budget = &n
		}
	}
	if err := stream.KwargsReasoning(kwargsParam, kwargs, &ask); err != nil {
		return err
	}
	// One request holds all three, so unlike the HTTP fields they can
	// contradict each other; SetReasoning would let "off" win silently.
	// Kwargs alone keep HTTP's meaning (enable_thinking false wins over
	// their reasoning_effort there too): the same object means the same on
	// both APIs, and only what the Reasoning message adds is checked.
	if ask.Enabled != nil && !*ask.Enabled {
		if ask.Budget != nil {
			return stream.InvalidParam("reasoning.budget_tokens", "reasoning.budget_tokens cannot be given with %s false", ask.EnabledParam)
		}
		fromMessage := ask.EnabledParam == "reasoning.enabled" || ask.EffortParam == "reasoning.effort"
		if ask.Effort != nil && *ask.Effort != "none" && fromMessage {
			return stream.InvalidParam(ask.EffortParam, "%s %q cannot be given with %s false (only \"none\" can)", ask.EffortParam, *ask.Effort, ask.EnabledParam)
		}
	}
	return g.SetReasoning(ask)
}
