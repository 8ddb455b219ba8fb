package grpcserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	sluicev1 "github.com/sluicehq/sluice/server/grpc/proto/sluice/v1"
)

// kwargsTemplate prints the variables chat_template_kwargs give it, each
// kind of JSON value once (server/kwargs_test.go's customTemplate).
const kwargsTemplate = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
	"flag={{ custom_flag }} n={{ n }} ok={{ ok }} items={{ items | join(',') }} obj={{ obj.k }}\n" +
	"{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

// kwargsChat is a one-message chat with kwargs given as the JSON object a
// client would put in an HTTP body.
func kwargsChat(t *testing.T, kwargs string) *sluicev1.Chat {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(kwargs), &m); err != nil {
		t.Fatal(err)
	}
	st, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return &sluicev1.Chat{Messages: []*sluicev1.ChatMessage{{Role: "user", Content: "hi"}}, ChatTemplateKwargs: st}
}

// TestChatTemplateKwargs: every key of Chat.chat_template_kwargs reaches
// the template as its JSON value (string, integer, boolean, list, object),
// through Tokenize and Generate alike, and the ids are the ones HTTP's
// /tokenize gives for the same object. Before the field, Chat had only
// messages and the template read every kwarg undefined.
func TestChatTemplateKwargs(t *testing.T) {
	r := newRig(t, rigOptions{template: kwargsTemplate})
	const kw = `{"custom_flag":"on","n":3,"ok":true,"items":["a","b"],"obj":{"k":"v"}}`
	const want = "flag=on n=3 ok=True items=a,b obj=v\n<|im_start|>assistant\n"
	chat := kwargsChat(t, kw)
	tok, err := r.client.Tokenize(context.Background(), &sluicev1.TokenizeRequest{Input: &sluicev1.TokenizeRequest_Chat{Chat: chat}})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, len(tok.GetTokenIds()))
	for i, id := range tok.GetTokenIds() {
		ids[i] = int32(id)
	}
	if text := r.model.Tokenizer.Decode(ids, false); !strings.HasSuffix(text, want) {
		t.Errorf("Tokenize: %q, want it to end %q", text, want)
	}

	body := `{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":` + kw + `}`
	resp, err := http.Post(httpFor(t, r)+"/tokenize", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct{ Tokens []int32 }
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP /tokenize: %d %v", resp.StatusCode, err)
	}
	if !slices.Equal(h.Tokens, ids) {
		t.Errorf("gRPC Tokenize %v, HTTP /tokenize %v", ids, h.Tokens)
	}

	got := drain(mustGenerate(t, r, &sluicev1.GenerateRequest{Input: &sluicev1.GenerateRequest_Chat{Chat: chat}, Sampling: greedy(1)}))
	if got.err != nil || got.complete == nil {
		t.Fatalf("Generate: %v", got.err)
	}
	if n := got.complete.GetUsage().GetPromptTokens(); int(n) != len(ids) {
		t.Errorf("Generate's prompt is %d tokens, Tokenize's %d", n, len(ids))
	}
	// Without them the template reads the variables undefined: a shorter
	// prompt, so the count above is the kwargs' doing.
	bare, err := r.client.Tokenize(context.Background(), &sluicev1.TokenizeRequest{Input: &sluicev1.TokenizeRequest_Chat{Chat: &sluicev1.Chat{Messages: chat.GetMessages()}}})
	if err != nil || len(bare.GetTokenIds()) >= len(ids) {
		t.Errorf("without kwargs: %d tokens (%v), with them %d", len(bare.GetTokenIds()), err, len(ids))
	}
}

// TestChatTemplateKwargsRefused: what HTTP refuses in chat_template_kwargs
// gRPC refuses with INVALID_ARGUMENT naming the same kwarg, on Generate
// and Tokenize, before any chunk; a number JSON cannot hold and a
// contradiction with GenerateRequest.reasoning too.
func TestChatTemplateKwargsRefused(t *testing.T) {
	r := newRig(t, rigOptions{template: kwargsTemplate})
	many := make([]string, 65)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d":1`, i)
	}
	deep := strings.Repeat("[", 17) + strings.Repeat("]", 17)
	nan := kwargsChat(t, `{}`)
	nan.ChatTemplateKwargs.Fields = map[string]*structpb.Value{"x": structpb.NewNumberValue(math.NaN())}
	unset := kwargsChat(t, `{}`)
	unset.ChatTemplateKwargs.Fields = map[string]*structpb.Value{"y": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{{}}})}
	for _, c := range []struct {
		name string
		chat *sluicev1.Chat
		rs   *sluicev1.Reasoning
		want string
	}{
		{"messages", kwargsChat(t, `{"messages":[]}`), nil, "chat_template_kwargs.messages: "},
		{"add_generation_prompt", kwargsChat(t, `{"add_generation_prompt":false}`), nil, "chat_template_kwargs.add_generation_prompt: "},
		{"tools", kwargsChat(t, `{"tools":[]}`), nil, "chat_template_kwargs.tools: "},
		{"bos_token", kwargsChat(t, `{"bos_token":"<s>"}`), nil, "chat_template_kwargs.bos_token: "},
		{"range", kwargsChat(t, `{"range":1}`), nil, "chat_template_kwargs.range: "},
		{"chat_template", kwargsChat(t, `{"chat_template":"x"}`), nil, "chat_template_kwargs.chat_template: "},
		{"not an identifier", kwargsChat(t, `{"a-b":1}`), nil, "chat_template_kwargs.a-b: "},
		{"too deep", kwargsChat(t, `{"deep":`+deep+`}`), nil, "chat_template_kwargs.deep nests"},
		{"too big", kwargsChat(t, `{"big":"`+strings.Repeat("x", 70000)+`"}`), nil, "chat_template_kwargs is at most"},
		{"too many", kwargsChat(t, `{`+strings.Join(many, ",")+`}`), nil, "chat_template_kwargs has at most 64 keys"},
		{"enable_thinking not a boolean", kwargsChat(t, `{"enable_thinking":"yes"}`), nil, "chat_template_kwargs.enable_thinking must be a boolean"},
		{"reasoning_effort not a string", kwargsChat(t, `{"reasoning_effort":1}`), nil, "chat_template_kwargs.reasoning_effort must be a string"},
		{"unknown effort", kwargsChat(t, `{"reasoning_effort":"extreme"}`), nil, "chat_template_kwargs.reasoning_effort must be one of"},
		{"NaN", nan, nil, "chat_template_kwargs.x has no JSON form"},
		{"no kind", unset, nil, "chat_template_kwargs.y has no JSON form: a Value with none"},
		{"enabled differs", kwargsChat(t, `{"enable_thinking":false}`), &sluicev1.Reasoning{Enabled: ptr(true)},
			"chat_template_kwargs.enable_thinking false differs from reasoning.enabled true"},
		{"effort differs", kwargsChat(t, `{"reasoning_effort":"low"}`), &sluicev1.Reasoning{Effort: ptr("high")},
			`chat_template_kwargs.reasoning_effort "low" differs from reasoning.effort "high"`},
		{"disabled with a budget", kwargsChat(t, `{"enable_thinking":false}`), &sluicev1.Reasoning{BudgetTokens: ptr[uint32](8)},
			"reasoning.budget_tokens cannot be given with chat_template_kwargs.enable_thinking false"},
		{"the message's disabled with an effort", kwargsChat(t, `{"reasoning_effort":"high"}`), &sluicev1.Reasoning{Enabled: ptr(false)},
			`chat_template_kwargs.reasoning_effort "high" cannot be given with reasoning.enabled false`},
		{"disabled twice with an effort", kwargsChat(t, `{"enable_thinking":false,"reasoning_effort":"high"}`), &sluicev1.Reasoning{Enabled: ptr(false)},
			`chat_template_kwargs.reasoning_effort "high" cannot be given with reasoning.enabled false`},
		{"disabled with the message's effort", kwargsChat(t, `{"enable_thinking":false}`), &sluicev1.Reasoning{Effort: ptr("high")},
			`reasoning.effort "high" cannot be given with chat_template_kwargs.enable_thinking false`},
	} {
		got := drain(mustGenerate(t, r, &sluicev1.GenerateRequest{Input: &sluicev1.GenerateRequest_Chat{Chat: c.chat}, Sampling: greedy(1), Reasoning: c.rs}))
		st, _ := status.FromError(got.err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.want) || got.chunks != 0 {
			t.Errorf("Generate, %s: %v after %d chunks, want INVALID_ARGUMENT containing %q", c.name, got.err, got.chunks, c.want)
		}
		if c.rs != nil {
			continue // Tokenize has no reasoning field
		}
		_, err := r.client.Tokenize(context.Background(), &sluicev1.TokenizeRequest{Input: &sluicev1.TokenizeRequest_Chat{Chat: c.chat}})
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), c.want) {
			t.Errorf("Tokenize, %s: %v, want INVALID_ARGUMENT containing %q", c.name, err, c.want)
		}
	}
	// At the limits: accepted (the template does not print these two).
	at := kwargsChat(t, `{"deep":`+strings.Repeat("[", 16)+strings.Repeat("]", 16)+`,"unused":"`+strings.Repeat("x", 60000)+`"}`)
	if _, err := r.client.Tokenize(context.Background(), &sluicev1.TokenizeRequest{Input: &sluicev1.TokenizeRequest_Chat{Chat: at}}); err != nil {
		t.Errorf("kwargs at the limits: %v", err)
	}
}

// TestChatTemplateKwargsReasoning: enable_thinking and reasoning_effort
// in the kwargs steer the reasoning as on HTTP, over a model that never
// closes it: off (or effort none) closes it in the prompt, so all is
// answer; enable_thinking false beside an effort in the kwargs alone is
// off, as HTTP takes the same object; agreeing with GenerateRequest.reasoning
// is accepted. A tokenizer with no Jinja template takes only these two.
func TestChatTemplateKwargsReasoning(t *testing.T) {
	r := newEndlessThinker(t)
	for _, c := range []struct {
		name, kw string
		rs       *sluicev1.Reasoning
		want     uint32 // reasoning tokens of 20
	}{
		{"none", `{}`, nil, 20},
		{"enable_thinking true", `{"enable_thinking":true}`, nil, 20},
		{"enable_thinking false", `{"enable_thinking":false}`, nil, 0},
		{"reasoning_effort none", `{"reasoning_effort":"none"}`, nil, 0},
		{"enable_thinking false, effort high", `{"enable_thinking":false,"reasoning_effort":"high"}`, nil, 0},
		{"agrees with reasoning", `{"enable_thinking":false}`, &sluicev1.Reasoning{Enabled: ptr(false)}, 0},
	} {
		got := generateReasoned(t, r, &sluicev1.GenerateRequest{Input: &sluicev1.GenerateRequest_Chat{Chat: kwargsChat(t, c.kw)}, Sampling: greedy(20), Reasoning: c.rs})
		if got.tokens != c.want || got.completion != 20 {
			t.Errorf("%s: %d reasoning tokens of %d, want %d of 20", c.name, got.tokens, got.completion, c.want)
		}
	}
	got := drain(mustGenerate(t, r, &sluicev1.GenerateRequest{Input: &sluicev1.GenerateRequest_Chat{Chat: kwargsChat(t, `{"custom_flag":"on"}`)}, Sampling: greedy(1)}))
	if st, _ := status.FromError(got.err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "chat_template_kwargs.custom_flag: ") {
		t.Errorf("a kwarg for a tokenizer with no template: %v", got.err)
	}
}
