package modeltest

import (
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/kernels"
)

// gptossTensorList is tensorList for a gpt-oss spec: biased attention with
// a sink per head, post_attention_norm before a biased router and experts
// with biases, an untied head.
func gptossTensorList(s Spec, out []tensorShape) []tensorShape {
	hd, e, f := s.HeadDim(), s.Experts, s.ExpertFFN
	add := func(name string, shape ...int) { out = append(out, tensorShape{name, shape}) }
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", s.Hidden)
		add(p+"attn_q.weight", s.Heads*hd, s.Hidden)
		add(p+"attn_q.bias", s.Heads*hd)
		add(p+"attn_k.weight", s.KVHeads*hd, s.Hidden)
		add(p+"attn_k.bias", s.KVHeads*hd)
		add(p+"attn_v.weight", s.KVHeads*hd, s.Hidden)
		add(p+"attn_v.bias", s.KVHeads*hd)
		add(p+"attn_output.weight", s.Hidden, s.Heads*hd)
		add(p+"attn_output.bias", s.Hidden)
		add(p+"attn_sinks.weight", s.Heads)
		add(p+"post_attention_norm.weight", s.Hidden)
		add(p+"ffn_gate_inp.weight", e, s.Hidden)
		add(p+"ffn_gate_inp.bias", e)
		add(p+"ffn_gate_exps.weight", e, f, s.Hidden)
		add(p+"ffn_gate_exps.bias", e, f)
		add(p+"ffn_up_exps.weight", e, f, s.Hidden)
		add(p+"ffn_up_exps.bias", e, f)
		add(p+"ffn_down_exps.weight", e, s.Hidden, f)
		add(p+"ffn_down_exps.bias", e, s.Hidden)
	}
	add("output_norm.weight", s.Hidden)
	add("output.weight", s.Vocab, s.Hidden)
	return out
}

// gptossDType is the type WriteGGUF stores a gpt-oss tensor in: biases F32
// whatever their rank, the experts in MXFP4 with ExpertsMXFP4.
func gptossDType(s Spec, name string, dt kernels.DType) kernels.DType {
	switch {
	case strings.HasSuffix(name, ".bias"):
		return kernels.F32
	case s.ExpertsMXFP4 && strings.HasSuffix(name, "_exps.weight"):
		return kernels.MXFP4
	}
	return dt
}

// gptossMeta is the gpt-oss.* metadata beyond the Llama keys WriteGGUF
// writes: the window (every other layer, from llama.cpp's default pattern)
// and YaRN.
func gptossMeta(s Spec, meta []KV) []KV {
	a := "gpt-oss."
	meta = append(meta,
		KV{a + "attention.key_length", uint32(s.HeadDim())},
		KV{a + "attention.value_length", uint32(s.HeadDim())},
		KV{a + "attention.sliding_window", uint32(s.Window)},
	)
	if y := s.YaRN; y != nil {
		meta = append(meta, KV{a + "rope.scaling.type", "yarn"}, KV{a + "rope.scaling.factor", y.Factor},
			KV{a + "rope.scaling.original_context_length", uint32(y.OriginalContext)})
	}
	return meta
}

// HarmonyTokens are gpt-oss's harmony markers, the last ids of a Harmony
// vocabulary in this order.
var HarmonyTokens = []string{"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"}

// HarmonyTemplate is a chat template in the shape of gpt-oss's (written
// here, shorter): a system message with the "Reasoning: medium" line its
// reasoning_effort argument sets, the request's system text and tools in a
// developer message, earlier calls as messages to functions.NAME on the
// commentary channel, the generation prompt <|start|>assistant.
const HarmonyTemplate = `{%- set effort = reasoning_effort if reasoning_effort is defined else "medium" -%}
{{- "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n\nReasoning: " + effort + "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message." -}}
{%- if tools %}{{- "\nCalls to these tools must go to the commentary channel: 'functions'." -}}{% endif -%}
{{- "<|end|>" -}}
{%- if messages[0].role == "system" or messages[0].role == "developer" -%}
{%- set dev = messages[0].content -%}{%- set loop_messages = messages[1:] -%}
{%- else -%}{%- set dev = "" -%}{%- set loop_messages = messages -%}{%- endif -%}
{%- if dev or tools -%}
{{- "<|start|>developer<|message|>" -}}
{%- if dev -%}{{- "# Instructions\n\n" + dev + "\n\n" -}}{%- endif -%}
{%- if tools -%}
{{- "# Tools\n\n## functions\n\nnamespace functions {\n\n" -}}
{%- for tool in tools -%}
{{- "// " + tool.function.description + "\ntype " + tool.function.name + " = (_: " + (tool.function.parameters | tojson) + ") => any;\n\n" -}}
{%- endfor -%}
{{- "} // namespace functions" -}}
{%- endif -%}
{{- "<|end|>" -}}
{%- endif -%}
{%- for message in loop_messages -%}
{%- if message.role == "assistant" and message.tool_calls -%}
{%- for tc in message.tool_calls -%}
{{- "<|start|>assistant to=functions." + tc.function.name + "<|channel|>commentary json<|message|>" + (tc.function.arguments | tojson) + "<|call|>" -}}
{%- endfor -%}
{%- elif message.role == "assistant" -%}
{{- "<|start|>assistant<|channel|>final<|message|>" + message.content + "<|end|>" -}}
{%- elif message.role == "tool" -%}
{{- "<|start|>functions to=assistant<|channel|>commentary<|message|>" + message.content + "<|end|>" -}}
{%- else -%}
{{- "<|start|>" + message.role + "<|message|>" + message.content + "<|end|>" -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- "<|start|>assistant" -}}{%- endif -%}`

// harmonyVocab is ggufVocab for a Harmony spec: the tiny vocabulary's
// first vocab-7 tokens, then HarmonyTokens as control tokens.
func harmonyVocab(vocab int) []KV {
	tokens, merges := Vocabulary(vocab - len(HarmonyTokens))
	types := make([]int32, len(tokens), vocab)
	for i := range types {
		types[i] = 1
	}
	types[0], types[1], types[2] = 3, 3, 3
	for _, t := range HarmonyTokens {
		tokens = append(tokens, t)
		types = append(types, 3)
	}
	return []KV{
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "smollm"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(BOSID)},
		{"tokenizer.ggml.eos_token_id", uint32(vocab - 2)}, // <|return|>
		{"tokenizer.ggml.unknown_token_id", uint32(UnknownID)},
		{"tokenizer.ggml.padding_token_id", uint32(EOSID)},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.ggml.add_space_prefix", false},
		{"tokenizer.chat_template", HarmonyTemplate},
	}
}
