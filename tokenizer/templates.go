package tokenizer

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/ardanlabs/jinja"
)

// builtinTemplates are chat templates for models that ship none (base
// models such as Gemma 3 270M) or ship one that a deployment wants to
// replace: `--chat-template NAME`. Each renders the turn markup its model
// family was instruction-tuned on; system messages go where the family
// expects them (Gemma has no system turn: it leads the next user turn).
var builtinTemplates = map[string]string{
	"chatml": `{%- for m in messages -%}
{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}`,

	"gemma": `{{- bos_token -}}
{%- set ns = namespace(sys='') -%}
{%- for m in messages -%}
{%- if m['role'] == 'system' -%}
{%- set ns.sys = ns.sys + (m['content'] | trim) + '\n\n' -%}
{%- else -%}
{%- set role = 'model' if m['role'] == 'assistant' else m['role'] -%}
{{- '<start_of_turn>' + role + '\n' + (ns.sys if role == 'user' else '') + (m['content'] | trim) + '<end_of_turn>\n' -}}
{%- if role == 'user' -%}{%- set ns.sys = '' -%}{%- endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}`,

	"llama3": `{{- bos_token -}}
{%- for m in messages -%}
{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n' + (m['content'] | trim) + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}`,
}

// BuiltinTemplates lists the names ChatTemplate accepts besides a file.
func BuiltinTemplates() []string {
	names := make([]string, 0, len(builtinTemplates))
	for n := range builtinTemplates {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ChatTemplate resolves a --chat-template argument: a built-in name, else
// the path of a Jinja file. The template is compiled here, so a broken one
// fails at startup instead of on the first chat request.
func ChatTemplate(nameOrFile string) (string, error) {
	src, ok := builtinTemplates[nameOrFile]
	if !ok {
		b, err := os.ReadFile(nameOrFile)
		if err != nil {
			return "", fmt.Errorf("tokenizer: chat template %q is neither a built-in (%s) nor a readable file: %w",
				nameOrFile, strings.Join(BuiltinTemplates(), ", "), err)
		}
		src = string(b)
	}
	if _, err := jinja.Compile(src); err != nil {
		return "", fmt.Errorf("tokenizer: chat template %s: %w", nameOrFile, err)
	}
	return src, nil
}

// SetChatTemplate replaces the model's chat template (the one its file
// carries, or none) with src, as ChatTemplate returns it. Call it before the
// tokenizer is shared: it is not safe alongside ApplyChatTemplate.
func (t *Tokenizer) SetChatTemplate(src string) {
	t.template = src
	t.templateOnce = sync.Once{}
	t.compiled, t.compileErr = nil, nil
}

// HasChatTemplate says whether chat requests can be rendered.
func (t *Tokenizer) HasChatTemplate() bool { return t.template != "" }
