package stream

import (
	"regexp"
	"slices"
	"strings"
)

// What a request asks of the model's reasoning (its chain of thought),
// read once here for every API: chat's reasoning_effort and
// chat_template_kwargs.enable_thinking, Responses' reasoning.effort,
// Messages' thinking and output_config.effort. A model that does not
// reason takes every such request and produces no reasoning (0 reasoning
// tokens in usage): the fields ask for a bound and a switch, which hold
// vacuously.

// ReasoningAsk is a request's reasoning fields in its API's terms; nil is
// absent. The Param names are the wire fields, for errors.
type ReasoningAsk struct {
	Enabled      *bool
	EnabledParam string
	Effort       *string
	EffortParam  string
	Budget       *int
	BudgetParam  string
}

// Reasoning is a request's validated reasoning controls.
type Reasoning struct {
	// Off: the request turned thinking off (enable_thinking false,
	// thinking disabled, effort none).
	Off bool
	// Effort is the effort asked for ("" when none was).
	Effort string
	// Budget bounds the reasoning in tokens; 0 is no bound but max_tokens.
	Budget int
}

// Efforts are the effort levels any API names, with the reasoning budget
// each maps to (0: none beyond max_tokens). OpenAI's none..xhigh and
// Anthropic's low..max share the scale.
var effortBudgets = map[string]int{
	"none": 0, "minimal": 256, "low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768, "max": 0,
}

// Efforts lists the effort values SetReasoning takes, for error texts.
var efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// SetReasoning validates a and stores it. An explicit budget wins over
// the effort's.
func (g *GenRequest) SetReasoning(a ReasoningAsk) error {
	var r Reasoning
	if a.Effort != nil {
		e := *a.Effort
		if !slices.Contains(efforts, e) {
			return InvalidParam(a.EffortParam, "%s must be one of %v, got %q", a.EffortParam, efforts, e)
		}
		r.Effort, r.Budget, r.Off = e, effortBudgets[e], e == "none"
	}
	if a.Budget != nil {
		if n := *a.Budget; n < 1 || n > MaxTokensCap {
			return InvalidParam(a.BudgetParam, "%s must be between 1 and %d, got %d", a.BudgetParam, MaxTokensCap, n)
		}
		r.Budget = *a.Budget
	}
	if a.Enabled != nil && !*a.Enabled {
		r.Off, r.Budget = true, 0
	}
	g.Reasoning = r
	return nil
}

// reasoningPrompt settles the end of a rendered chat prompt for the
// model's reasoning: with thinking off it ends with the empty reasoning
// block (mk.Skip, what the templates with a switch write themselves), so
// the model answers at once; otherwise it records whether the template
// already opened the reasoning (the reply then starts inside it).
func reasoningPrompt(mk ReasoningMarkup, g *GenRequest, text string) string {
	g.reasoningOpened = false
	if !mk.On() {
		return text
	}
	if mk.Harmony {
		// A prompt may open the analysis message itself (a prefilled
		// reply): the reply then starts inside it, as with other markup.
		g.reasoningOpened = strings.HasSuffix(text, mk.Open)
		return harmonyEffort(g.Reasoning, text)
	}
	tail := strings.TrimRight(text, " \t\r\n")
	switch {
	case g.Reasoning.Off && strings.HasSuffix(tail, mk.Open):
		return tail + strings.TrimPrefix(mk.Skip, mk.Open)
	case g.Reasoning.Off && !strings.HasSuffix(tail, mk.Close):
		return text + mk.Skip
	case g.Reasoning.Off:
		return text
	}
	g.reasoningOpened = strings.HasSuffix(tail, mk.Open)
	return text
}

// harmonyLevels maps the effort scale onto gpt-oss's three levels. It
// cannot stop reasoning: off (and none) asks for the least it does.
var harmonyLevels = map[string]string{
	"none": "low", "minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high",
}

// harmonyReasoningLine is the effort line of harmony's system message,
// which gpt-oss's template writes from its reasoning_effort argument
// ("medium" unless given): any word, since a request's
// chat_template_kwargs.reasoning_effort reaches the template as given
// ("xhigh") and is mapped onto gpt-oss's levels here.
var harmonyReasoningLine = regexp.MustCompile(`(?m)^Reasoning: [a-z]+$`)

// harmonyEffort sets the effort a request asks for in the rendered
// harmony prompt's system message, the first message, which the template
// writes whole (a request's own system text goes to the developer message
// after it, so it cannot move the line).
func harmonyEffort(r Reasoning, text string) string {
	level := harmonyLevels[r.Effort]
	if r.Off {
		level = "low"
	}
	if level == "" || !strings.HasPrefix(text, hStart+"system"+hMessage) {
		return text
	}
	end := strings.Index(text, hEnd)
	if end < 0 {
		return text
	}
	loc := harmonyReasoningLine.FindStringIndex(text[:end])
	if loc == nil {
		return text
	}
	return text[:loc[0]] + "Reasoning: " + level + text[loc[1]:]
}
