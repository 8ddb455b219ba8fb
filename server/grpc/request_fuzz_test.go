package grpcserver

import (
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// FuzzGenerateRequest feeds Generate's request decoding (proto wire bytes,
// then genRequest: prompt, chat, chat_template_kwargs, reasoning, sampling)
// arbitrary bytes: it must answer a request or an error, never panic or
// hang. Seeds carry the fields most recently added to the listener's
// surface: a kwargs Struct nested past the limit, non-finite numbers, and
// contradictory reasoning controls.
func FuzzGenerateRequest(f *testing.F) {
	deep := structpb.NewStringValue("x")
	for range 40 {
		deep = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{deep}})
	}
	budget, effort, off := uint32(8), "high", false
	seeds := []*sluicev1.GenerateRequest{
		{Input: &sluicev1.GenerateRequest_Text{Text: "hi"}},
		{Input: &sluicev1.GenerateRequest_Chat{Chat: &sluicev1.Chat{
			Messages: []*sluicev1.ChatMessage{{Role: "user", Content: "hi"}},
			ChatTemplateKwargs: &structpb.Struct{Fields: map[string]*structpb.Value{
				"deep": deep, "nan": structpb.NewNumberValue(math.NaN()), "inf": structpb.NewNumberValue(math.Inf(1)),
				"empty": {}, "messages": structpb.NewStringValue("<|im_start|>"), strings.Repeat("k", 300): structpb.NewBoolValue(true),
				"enable_thinking": structpb.NewBoolValue(false),
			}},
		}}, Reasoning: &sluicev1.Reasoning{Enabled: &off, Effort: &effort, BudgetTokens: &budget}},
		{Input: &sluicev1.GenerateRequest_TokenIds{TokenIds: &sluicev1.TokenIds{Ids: []uint32{1, math.MaxUint32}}}, Reasoning: &sluicev1.Reasoning{Effort: &effort}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r sluicev1.GenerateRequest
		if proto.Unmarshal(data, &r) != nil {
			return
		}
		g, err := genRequest(&r)
		if (g == nil) == (err == nil) {
			t.Fatalf("genRequest gave %v and %v: want a request or an error", g, err)
		}
	})
}
