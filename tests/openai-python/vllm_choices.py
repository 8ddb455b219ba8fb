"""vLLM's prompt extensions with several choices (n > 1, a list of prompts)
through the official OpenAI Python SDK (pinned by the Go test that runs
this), on a live server with the default model; prints {"ok", "failures",
...}. prompt_logprobs once per prompt (each completion choice its own
prompt's, chat's beside the choices), echo with logprobs whole and
streamed, chat echo, continuous_usage_stats per choice."""
import json
import os

import openai

client = openai.OpenAI(base_url=os.environ["SLUICE_URL"] + "/v1", api_key="unused", max_retries=0)
model = os.environ.get("SLUICE_MODEL", "")
failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)


prompts = ["The capital of France is", "Two plus two is"]

# prompt_logprobs with a list of prompts and n 2: every choice carries its
# own prompt's, equal to what a request of one choice gets.
alone = [client.completions.create(model=model, prompt=p, max_tokens=1, extra_body={"prompt_logprobs": 1})
         .choices[0].model_extra.get("prompt_logprobs") for p in prompts]
r = client.completions.create(model=model, prompt=prompts, n=2, max_tokens=2, extra_body={"prompt_logprobs": 1})
check(len(r.choices) == 4, f"{len(r.choices)} choices")
for c in r.choices:
    plp = c.model_extra.get("prompt_logprobs")
    check(plp == alone[c.index // 2], f"choice {c.index} prompt_logprobs {plp} vs alone {alone[c.index // 2]}")

# chat with n 3: one prompt_logprobs beside the choices.
ask = [{"role": "user", "content": "Name a color."}]
one = client.chat.completions.create(model=model, messages=ask, max_tokens=2, extra_body={"prompt_logprobs": 0})
r = client.chat.completions.create(model=model, messages=ask, max_tokens=2, n=3, extra_body={"prompt_logprobs": 0})
check(len(r.choices) == 3 and r.model_extra.get("prompt_logprobs") == one.model_extra.get("prompt_logprobs"),
      f"chat n 3 prompt_logprobs: {r.model_extra.get('prompt_logprobs')}")

# echo with logprobs, a list and n 2, greedy: every choice leads with its
# prompt and its logprobs (null first), streamed as whole.
r = client.completions.create(model=model, prompt=prompts, n=2, max_tokens=3, temperature=0, logprobs=1, echo=True)
whole = {}
for c in r.choices:
    lp = c.logprobs
    check(c.text.startswith(prompts[c.index // 2]) and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
          and all(v is not None for v in lp.token_logprobs[1:]), f"echo choice {c.index}: {c.text!r} {lp}")
    whole[c.index] = (c.text, lp.token_logprobs)
streamed = {}
for ch in client.completions.create(model=model, prompt=prompts, n=2, max_tokens=3, temperature=0, logprobs=1, echo=True, stream=True):
    for c in ch.choices:
        text, lps = streamed.get(c.index, ("", []))
        streamed[c.index] = (text + c.text, lps + (c.logprobs.token_logprobs if c.logprobs else []))
check(streamed == whole, f"streamed echo {streamed} vs whole {whole}")
report["echo"] = {i: t for i, (t, _) in whole.items()}

# chat echo with n 2: the final assistant message before every reply.
msgs = [{"role": "user", "content": "Write a sentence about cats."}, {"role": "assistant", "content": "Cats are"}]
extra = {"add_generation_prompt": False, "continue_final_message": True, "echo": True}
r = client.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0, n=2, extra_body=extra)
check(len(r.choices) == 2 and all(c.message.content.startswith("Cats are") for c in r.choices),
      f"chat echo: {[c.message.content for c in r.choices]}")
texts = {}
for ch in client.chat.completions.create(model=model, messages=msgs, max_tokens=4, temperature=0, n=2, extra_body=extra, stream=True):
    for c in ch.choices:
        texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
check(texts == {c.index: c.message.content for c in r.choices}, f"streamed chat echo {texts}")

# continuous_usage_stats with n 2: each choice chunk its own usage so far.
usages = {}
for ch in client.chat.completions.create(model=model, messages=ask, max_tokens=4, n=2, stream=True,
                                         extra_body={"ignore_eos": True},
                                         stream_options={"include_usage": True, "continuous_usage_stats": True}):
    check(ch.usage is not None, f"chunk without usage: {ch}")
    for c in ch.choices:
        usages.setdefault(c.index, []).append(ch.usage.completion_tokens)
check(sorted(usages) == [0, 1] and all(u == sorted(u) and u[-1] == 4 for u in usages.values()), f"continuous usage: {usages}")
report["continuous usage"] = usages

print(json.dumps({"ok": not failures, "failures": failures, "report": report}))
