package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"

	"github.com/sluicehq/sluice/engine"
)

// ChatMessage is one turn of a chat, its content flattened to text.
type ChatMessage struct {
	Role    string
	Content string
	// Tool turns (tools.go): an assistant message's calls, and the call a
	// tool message answers.
	ToolCalls  []ToolCall
	ToolCallID string
	// Reasoning is an assistant turn's reasoning, given to the template
	// as reasoning_content (Qwen3's keeps it for the turns of the current
	// tool loop, as the model saw it); "" is none.
	Reasoning string
}

// GenRequest is a validated generation request, before tokenization. Every
// transport builds the same value from its own wire shape (OpenAI JSON,
// protobuf) through SetMessages, SetPrompt and SetParams, so a rule holds
// for all of them at once.
type GenRequest struct {
	Model     string
	Chat      bool
	Messages  []ChatMessage // Chat
	Prompt    string        // !Chat, text prompt
	PromptIDs []int32       // !Chat, token-id prompt (used instead of Prompt when set)
	// Batch, when set, is a completions list of prompts used instead of
	// Prompt and PromptIDs; N is the choices per prompt, 0 meaning 1
	// (choices.go: PrepareChoices, SubmitChoices, PumpChoices).
	Batch []BatchPrompt
	N     int
	// MaxTokens bounds the output; 0 means up to the context length.
	MaxTokens    int
	Sampling     engine.SamplingParams
	Stop         []string
	StopTokens   []int32
	Stream       bool
	IncludeUsage bool
	User         string
	Output       Output // structured outputs (structured.go); the zero value is free text
	Tools        Tools  // tool calling (tools.go); the zero value offers none
	// CacheSalt is the request's cache_salt (SetCacheSalt): only requests
	// with the same one share cached prompt blocks. ForTenant mixes in the
	// key's partition.
	CacheSalt string
	// Reasoning is what the request asks of the model's thinking
	// (reasoning.go).
	Reasoning Reasoning
	// TemplateKwargs are the request's chat_template_kwargs, variables the
	// chat template is given beside the ones the server sets
	// (SetTemplateKwargs; toolprompt.go renders with them).
	TemplateKwargs map[string]any
	// ContextEdits are Anthropic's context_management edits, applied to
	// the messages when the prompt is rendered (contextedit.go).
	ContextEdits *ContextEdits
	// reasoningOpened: the rendered prompt ends inside the reasoning (the
	// template wrote the opening marker), set when it is encoded.
	reasoningOpened bool

	// Logprobs asks for each token's logprob and TopLogprobs alternatives
	// (engine.Logprob), framed by the transport's LogprobEmitter.
	Logprobs    bool
	TopLogprobs int
	// LogitBias, MinTokens and IgnoreEOS are the engine's controls
	// (engine/controls.go), from logit_bias, min_tokens and ignore_eos.
	LogitBias map[int32]float32
	MinTokens int
	IgnoreEOS bool
	// Echo puts the prompt's text before the completion (OpenAI
	// completions' echo; the OpenAI adapter frames it).
	Echo bool
	// PromptLogprobs asks for the prompt tokens' logprobs with
	// PromptTopLogprobs alternatives (vLLM's prompt_logprobs). Echo with
	// Logprobs needs them too, with TopLogprobs alternatives: for either
	// Prepare hands the engine an engine.PromptLogprobs to fill, which the
	// transport reads from the request it submitted.
	PromptLogprobs    bool
	PromptTopLogprobs int
	// ContinuousUsage puts the usage so far on every chunk of a stream
	// (vLLM's stream_options.continuous_usage_stats, with include_usage).
	ContinuousUsage bool
	// TruncatePromptTokens, when not 0, keeps the prompt's last that many
	// tokens (vLLM's truncate_prompt_tokens; -1: the model's context).
	TruncatePromptTokens int
	// ContinueFinalMessage ends the prompt with the final (assistant)
	// message's content: no end of turn, no generation prompt, so the
	// reply continues it (vLLM's continue_final_message; prepare.go).
	// NoGenerationPrompt ends it after the final message's turn
	// (add_generation_prompt false).
	ContinueFinalMessage bool
	NoGenerationPrompt   bool
	// AllowSpecialTokens lets a control token's spelling in message text
	// ("<|im_end|>") be that control token, as the template's own markers
	// are. Off by default: message text is plain text (plaintext.go).
	AllowSpecialTokens bool
}

// Limits on the stop list; the hold-back window is the longest stop string.
const (
	MaxStops      = 16
	MaxStopLength = 256
)

// Params are a request's generation fields as the client gave them, in the
// OpenAI schema's names; nil is absent. Transports fill it, SetParams
// validates it.
type Params struct {
	MaxTokens *int
	// MaxTokensParam is the field MaxTokens came from, for messages
	// ("max_completion_tokens"); "" is "max_tokens".
	MaxTokensParam    string
	Temperature       *float64
	TopP              *float64
	TopK              *int // -1 and 0 are off
	MinP              *float64
	PresencePenalty   *float64
	FrequencyPenalty  *float64
	RepetitionPenalty *float64
	Seed              *uint64
	Stop              []string
	N                 *int
	Logprobs          *bool
	TopLogprobs       *int // 0 to engine.MaxTopLogprobs; needs Logprobs
	LogitBias         map[int32]float64
	MinTokens         *int
	IgnoreEOS         *bool
	StopTokenIDs      []int32
}

// SetMessages validates and stores a chat. "developer" is OpenAI's newer
// name for "system", which is the only one chat templates know. Another
// role (a name: a letter, then up to 63 letters, digits, _ or -) goes to
// the template as it is, as vLLM passes it; Prepare refuses it, naming it,
// when the template cannot render it (customRoles).
func (g *GenRequest) SetMessages(msgs []ChatMessage) error {
	if len(msgs) == 0 {
		return InvalidParam("messages", "messages must be a non-empty list")
	}
	g.Chat = true
	g.Messages = make([]ChatMessage, 0, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "developer":
			m.Role = "system"
		case "system", "user", "assistant", "tool":
		default:
			if !roleName.MatchString(m.Role) {
				return InvalidParam(fmt.Sprintf("messages[%d].role", i),
					"messages[%d].role %q is neither system, developer, user, assistant, tool nor a role name (a letter, then up to 63 letters, digits, _ or -)", i, m.Role)
			}
		}
		g.Messages = append(g.Messages, m)
	}
	return nil
}

var roleName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

// customRole is the index of g's first message whose role chat templates
// do not all know, or -1.
func (g *GenRequest) customRole() int {
	for i, m := range g.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return i
		}
	}
	return -1
}

// SetPromptIDs stores a token-id prompt.
func (g *GenRequest) SetPromptIDs(ids []int32) error {
	if len(ids) == 0 {
		return InvalidParam("prompt", "prompt must be a string, a non-empty list of token ids, or a list of those")
	}
	if len(ids) > MaxTokenIDs {
		return InvalidParam("prompt", "a prompt is at most %d token ids, got %d", MaxTokenIDs, len(ids))
	}
	g.PromptIDs = ids
	return nil
}

// SetParams validates p and stores it.
func (g *GenRequest) SetParams(p Params) error {
	for _, step := range []func(Params) error{g.setLimits, g.setSampling, g.setStop, g.setLogprobs, g.setControls} {
		if err := step(p); err != nil {
			return err
		}
	}
	return nil
}

func (g *GenRequest) setLimits(p Params) error {
	if p.MaxTokens != nil {
		param := p.MaxTokensParam
		if param == "" {
			param = "max_tokens"
		}
		if n := *p.MaxTokens; n < 1 || n > MaxTokensCap {
			return InvalidParam(param, "%s must be between 1 and %d, got %d", param, MaxTokensCap, n)
		}
		g.MaxTokens = *p.MaxTokens
	}
	return g.setN(p) // choices.go
}

// inRange checks an optional float field against [lo, hi].
func inRange(param string, v *float64, lo, hi float64) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || *v < lo || *v > hi {
		return InvalidParam(param, "%s must be between %g and %g, got %g", param, lo, hi, *v)
	}
	return nil
}

func (g *GenRequest) setSampling(p Params) error {
	for _, c := range []struct {
		param  string
		v      *float64
		lo, hi float64
		dst    *float32
	}{
		{"temperature", p.Temperature, 0, 2, &g.Sampling.Temperature},
		{"top_p", p.TopP, 0, 1, &g.Sampling.TopP},
		{"min_p", p.MinP, 0, 1, &g.Sampling.MinP},
		{"presence_penalty", p.PresencePenalty, -2, 2, &g.Sampling.PresencePenalty},
		{"frequency_penalty", p.FrequencyPenalty, -2, 2, &g.Sampling.FrequencyPenalty},
		{"repetition_penalty", p.RepetitionPenalty, 0, 10, &g.Sampling.RepetitionPenalty},
	} {
		if err := inRange(c.param, c.v, c.lo, c.hi); err != nil {
			return err
		}
		if c.v != nil {
			*c.dst = float32(*c.v)
		}
	}
	if p.TopP != nil && *p.TopP == 0 {
		return InvalidParam("top_p", "top_p must be above 0, got 0")
	}
	if p.RepetitionPenalty != nil && *p.RepetitionPenalty == 0 {
		return InvalidParam("repetition_penalty", "repetition_penalty must be above 0, got 0")
	}
	if p.TopK != nil {
		switch k := *p.TopK; {
		case k == -1: // vLLM's spelling of "off"
		case k < 0:
			return InvalidParam("top_k", "top_k must be -1, 0 (off) or positive, got %d", k)
		default:
			g.Sampling.TopK = k
		}
	}
	if p.Seed != nil {
		seed := *p.Seed
		g.Sampling.Seed = &seed
	}
	return nil
}

func (g *GenRequest) setStop(p Params) error {
	if len(p.Stop) > MaxStops {
		return InvalidParam("stop", "at most %d stop strings, got %d", MaxStops, len(p.Stop))
	}
	for i, s := range p.Stop {
		if s == "" || len(s) > MaxStopLength {
			return InvalidParam("stop", "stop[%d] must be 1 to %d bytes long, got %d", i, MaxStopLength, len(s))
		}
	}
	g.Stop = p.Stop
	return nil
}

func (g *GenRequest) setLogprobs(p Params) error {
	g.Logprobs = p.Logprobs != nil && *p.Logprobs
	if p.TopLogprobs == nil {
		return nil
	}
	switch k := *p.TopLogprobs; {
	case k < 0 || k > engine.MaxTopLogprobs:
		return InvalidParam("top_logprobs", "top_logprobs must be between 0 and %d, got %d", engine.MaxTopLogprobs, k)
	case k > 0 && !g.Logprobs:
		return InvalidParam("top_logprobs", "top_logprobs needs logprobs: true")
	default:
		g.TopLogprobs = k
	}
	return nil
}

func (g *GenRequest) setControls(p Params) error {
	if n := len(p.LogitBias); n > MaxLogitBiasEntries {
		return InvalidParam("logit_bias", "logit_bias has at most %d entries, got %d", MaxLogitBiasEntries, n)
	}
	for id, b := range p.LogitBias {
		if math.IsNaN(b) || b < -engine.MaxLogitBias || b > engine.MaxLogitBias {
			return InvalidParam("logit_bias", "logit_bias for token %d must be between -%d and %d, got %g", id, engine.MaxLogitBias, engine.MaxLogitBias, b)
		}
		if id < 0 {
			return InvalidParam("logit_bias", "logit_bias names token %d, not a token id", id)
		}
		if g.LogitBias == nil {
			g.LogitBias = make(map[int32]float32, len(p.LogitBias))
		}
		g.LogitBias[id] = float32(b)
	}
	if p.MinTokens != nil {
		if n := *p.MinTokens; n < 0 || n > MaxTokensCap || g.MaxTokens > 0 && n > g.MaxTokens {
			return InvalidParam("min_tokens", "min_tokens must be between 0 and max_tokens (at most %d), got %d", MaxTokensCap, n)
		}
		g.MinTokens = *p.MinTokens
	}
	g.IgnoreEOS = p.IgnoreEOS != nil && *p.IgnoreEOS
	if len(p.StopTokenIDs) > MaxStops*4 {
		return InvalidParam("stop_token_ids", "at most %d stop_token_ids, got %d", MaxStops*4, len(p.StopTokenIDs))
	}
	if p.StopTokenIDs != nil {
		g.StopTokens = p.StopTokenIDs
	}
	return nil
}

// Limits on chat_template_kwargs. A template may loop over what it is
// given, so the values are bounded like the prompt's own parts: far above
// a real kwarg (a flag, an identity line, a small list of tool names) and
// small enough that a hostile request costs little.
const (
	MaxTemplateKwargs      = 64
	MaxTemplateKwargsBytes = 64 << 10 // names and JSON values together
	MaxTemplateKwargsDepth = 16       // nesting of arrays and objects
)

// serverTemplateVars are the variables the renderer sets itself
// (tokenizer.RenderChatTemplate), the Jinja globals a variable would hide
// (ardanlabs/jinja's), and what vLLM refuses as a kwarg (chat_template,
// tokenize): a kwarg by one of these names would replace or fight a
// field the request has its own way to set, so it is refused, not
// silently overridden either way.
var serverTemplateVars = map[string]string{
	"messages":               "the request's messages",
	"tools":                  "the request's tools",
	"add_generation_prompt":  "the add_generation_prompt field",
	"continue_final_message": "the continue_final_message field",
	"bos_token":              "the model's vocabulary",
	"eos_token":              "the model's vocabulary",
	"chat_template":          "the server (a per-request template is not served)",
	"tokenize":               "the server",
	"namespace":              "the template engine (a built-in function)",
	"raise_exception":        "the template engine (a built-in function)",
	"range":                  "the template engine (a built-in function)",
	"joiner":                 "the template engine (a built-in function)",
	"dict":                   "the template engine (a built-in function)",
	"cycler":                 "the template engine (a built-in function)",
	"strftime_now":           "the template engine (a built-in function)",
}

var templateVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// SetTemplateKwargs validates and stores a request's chat_template_kwargs
// (param names the field on the wire), each JSON value becoming the
// template value encoding/json decodes it to, numbers as json.Number so
// an integer stays one. A name the template could not read (not an
// identifier) or one the server sets itself is refused by name, as are
// kwargs past the limits above. Reasoning's keys (enable_thinking,
// reasoning_effort) are stored too: the caller reads their meaning for
// the reasoning controls (SetReasoning) separately.
func (g *GenRequest) SetTemplateKwargs(param string, raw map[string]json.RawMessage) error {
	if len(raw) == 0 {
		g.TemplateKwargs = nil
		return nil
	}
	if len(raw) > MaxTemplateKwargs {
		return InvalidParam(param, "%s has at most %d keys, got %d", param, MaxTemplateKwargs, len(raw))
	}
	names := make([]string, 0, len(raw))
	size := 0
	for k, v := range raw {
		names = append(names, k)
		size += len(k) + len(v)
	}
	if size > MaxTemplateKwargsBytes {
		return InvalidParam(param, "%s is at most %d bytes of names and values, got %d", param, MaxTemplateKwargsBytes, size)
	}
	slices.Sort(names)
	kw := make(map[string]any, len(raw))
	for _, k := range names {
		p := param + "." + k
		if !templateVarName.MatchString(k) {
			return InvalidParam(p, "%s: a template reads a variable by a name of letters, digits and _ (not first), so it could not read this one", p)
		}
		if who, ok := serverTemplateVars[k]; ok {
			return InvalidParam(p, "%s: the template's %s is set by %s; a kwarg cannot replace it", p, k, who)
		}
		d := json.NewDecoder(bytes.NewReader(raw[k]))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return InvalidParam(p, "%s is not a JSON value: %v", p, err)
		}
		if depth(v) > MaxTemplateKwargsDepth {
			return InvalidParam(p, "%s nests arrays and objects deeper than %d levels", p, MaxTemplateKwargsDepth)
		}
		kw[k] = v
	}
	g.TemplateKwargs = kw
	return nil
}

// KwargsReasoning folds what a request's chat_template_kwargs (param
// names the field) ask of the reasoning into ask, which holds what the
// API's own fields asked: enable_thinking (Qwen3's and SmolLM3's switch)
// and reasoning_effort (gpt-oss's, which llama.cpp's and vLLM's users pass
// there) steer it on any model, not only through a template that reads
// them. One the API's own field also gives must agree with it: either
// winning silently would leave the other ignored. Every API that takes
// kwargs reads them here, so they mean the same on each.
func KwargsReasoning(param string, raw map[string]json.RawMessage, ask *ReasoningAsk) error {
	if v, ok := raw["enable_thinking"]; ok {
		p := param + ".enable_thinking"
		var on *bool
		if err := json.Unmarshal(v, &on); err != nil {
			return InvalidParam(p, "%s must be a boolean", p)
		}
		if on != nil && ask.Enabled != nil && *on != *ask.Enabled {
			return InvalidParam(p, "%s %v differs from %s %v", p, *on, ask.EnabledParam, *ask.Enabled)
		}
		if on != nil && ask.Enabled == nil { // agreeing, the API's own field keeps its name
			ask.Enabled, ask.EnabledParam = on, p
		}
	}
	if v, ok := raw["reasoning_effort"]; ok {
		p := param + ".reasoning_effort"
		var effort string
		if err := json.Unmarshal(v, &effort); err != nil {
			return InvalidParam(p, "%s must be a string", p)
		}
		if ask.Effort != nil && *ask.Effort != effort {
			return InvalidParam(p, "%s %q differs from %s %q", p, effort, ask.EffortParam, *ask.Effort)
		}
		ask.Effort, ask.EffortParam = &effort, p
	}
	return nil
}

// depth is how deeply v nests arrays and objects (a scalar: 0).
func depth(v any) int {
	d := 0
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			d = max(d, depth(e))
		}
		return d + 1
	case map[string]any:
		for _, e := range x {
			d = max(d, depth(e))
		}
		return d + 1
	}
	return 0
}
