package models

// ReasoningFormat names how a model writes its reasoning (chain of thought)
// into the tokens it generates, so that the layer streaming to clients
// (server/stream, issue 24) can split it from the answer. The models package
// only names the format; it never parses text.
type ReasoningFormat string

const (
	// ReasoningNone: no reasoning markup; everything generated is content.
	ReasoningNone ReasoningFormat = ""
	// ReasoningThinkTags: reasoning between <think> and </think> before the
	// answer (Qwen3, SmolLM3). SmolLM3's template turns it on with /think
	// (its default) and off with /no_think in the system prompt, and then
	// emits an empty <think>\n\n</think> block itself.
	ReasoningThinkTags ReasoningFormat = "think-tags"
	// ReasoningGemma4Channel: Gemma 4's thinking, a <|channel>thought\n …
	// <channel|> block before the answer (the two markers are single
	// tokens the converter keeps visible). Its template turns it on with
	// enable_thinking (a <|think|> line opening the system turn); off, the
	// generation prompt already holds an empty <|channel>thought\n<channel|>.
	ReasoningGemma4Channel ReasoningFormat = "gemma4-channel"
	// ReasoningHarmony: gpt-oss's harmony format, messages of
	// <|start|>assistant<|channel|>NAME<|message|>…<|end|> (or <|call|>,
	// <|return|>): the analysis channel is reasoning, final the answer,
	// commentary tool calls (to=functions.NAME in the header).
	ReasoningHarmony ReasoningFormat = "harmony"
)

// Reasoning is the reasoning format of the architecture c describes, as its
// released chat templates use it.
func (c Config) Reasoning() ReasoningFormat {
	switch c.Arch {
	case "qwen3", "qwen3moe", "smollm3":
		return ReasoningThinkTags
	case "gemma4":
		return ReasoningGemma4Channel
	case "gpt-oss":
		return ReasoningHarmony
	}
	return ReasoningNone
}
