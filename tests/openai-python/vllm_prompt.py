"""vLLM's prompt extensions through the official OpenAI Python SDK (pinned by
the Go test that runs this), sent as vLLM's users send them (extra_body, or
the SDK's own echo and logprobs), on a live server with the default model;
prints {"ok", "failures", ...}. prompt_logprobs on chat and completions (and
its 400 on a stream), echo with logprobs whole and streamed (the prompt's
logprobs equal prompt_logprobs'), stream_options.continuous_usage_stats,
truncate_prompt_tokens, continue_final_message with echo, a custom role."""
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


prompt = "The capital of France is"

# prompt_logprobs on completions: one entry per prompt token, null first.
r = client.completions.create(model=model, prompt=prompt, max_tokens=3, temperature=0, extra_body={"prompt_logprobs": 2})
plp = r.choices[0].model_extra.get("prompt_logprobs")
check(isinstance(plp, list) and len(plp) == r.usage.prompt_tokens and plp[0] is None
      and all(isinstance(e, dict) and 1 <= len(e) <= 3 for e in plp[1:]), f"completions prompt_logprobs: {plp}")
ids = [None] + [next(iter(e)) for e in plp[1:]]  # the prompt's own token leads each entry
own = [None] + [e[i]["logprob"] for e, i in zip(plp[1:], ids[1:])]

# echo with logprobs: the prompt's tokens first, token_logprobs null first,
# the same values prompt_logprobs gave.
r = client.completions.create(model=model, prompt=prompt, max_tokens=3, temperature=0, logprobs=2, echo=True)
lp = r.choices[0].logprobs
n = r.usage.prompt_tokens
check(r.choices[0].text.startswith(prompt) and len(lp.tokens) == n + 3 and lp.token_logprobs[0] is None
      and lp.top_logprobs[0] is None and all(v is not None for v in lp.token_logprobs[1:]), f"echo: {lp}")
check(all(abs(a - b) < 1e-4 for a, b in zip(lp.token_logprobs[1:n], own[1:])), f"echo {lp.token_logprobs[:n]} vs prompt_logprobs {own}")
report["echo tokens"] = lp.tokens
streamed, text = [], ""
for c in client.completions.create(model=model, prompt=prompt, max_tokens=3, temperature=0, logprobs=2, echo=True, stream=True):
    if c.choices:
        text += c.choices[0].text
        if c.choices[0].logprobs:
            streamed += c.choices[0].logprobs.token_logprobs
check(text == r.choices[0].text and streamed == lp.token_logprobs, f"streamed echo {text!r} {streamed} vs {lp.token_logprobs}")

# prompt_logprobs on chat, beside the choices; refused on a stream.
ask = [{"role": "user", "content": "Name a color."}]
r = client.chat.completions.create(model=model, messages=ask, max_tokens=3, extra_body={"prompt_logprobs": 0})
plp = r.model_extra.get("prompt_logprobs")
check(isinstance(plp, list) and len(plp) == r.usage.prompt_tokens and plp[0] is None
      and all(len(e) == 1 and all({"logprob", "rank", "decoded_token"} <= set(v) for v in e.values()) for e in plp[1:]),
      f"chat prompt_logprobs: {plp}")
try:
    for _ in client.chat.completions.create(model=model, messages=ask, max_tokens=3, stream=True, extra_body={"prompt_logprobs": 1}):
        pass
    failures.append("prompt_logprobs on a stream accepted")
except openai.BadRequestError as e:
    check(isinstance(e.body, dict) and e.body.get("param") == "prompt_logprobs", f"prompt_logprobs stream: {e.body}")

# continuous_usage_stats: usage on every chunk, counting up.
usages = []
for c in client.chat.completions.create(model=model, messages=ask, max_tokens=5, stream=True,
                                        stream_options={"include_usage": True, "continuous_usage_stats": True}):
    usages.append(c.usage.completion_tokens if c.usage else None)
check(usages and None not in usages and usages == sorted(usages) and usages[-1] >= 1, f"continuous usage: {usages}")
report["continuous usage"] = usages

# truncate_prompt_tokens keeps the prompt's last N tokens.
r = client.completions.create(model=model, prompt="one two three four five six seven eight nine ten", max_tokens=2,
                              extra_body={"truncate_prompt_tokens": 4})
check(r.usage.prompt_tokens == 4, f"truncate_prompt_tokens 4: {r.usage}")

# continue_final_message: the reply continues the assistant's text, which echo repeats.
msgs = [{"role": "user", "content": "Write a sentence about cats."}, {"role": "assistant", "content": "Cats are"}]
r = client.chat.completions.create(model=model, messages=msgs, max_tokens=6, temperature=0,
                                   extra_body={"add_generation_prompt": False, "continue_final_message": True, "echo": True})
check(r.choices[0].message.content.startswith("Cats are"), f"continue_final_message: {r.choices[0].message.content!r}")
report["continued"] = r.choices[0].message.content
try:
    client.chat.completions.create(model=model, messages=msgs, max_tokens=2, extra_body={"continue_final_message": True})
    failures.append("continue_final_message with the generation prompt accepted")
except openai.BadRequestError as e:
    check(isinstance(e.body, dict) and e.body.get("param") == "continue_final_message", f"both true: {e.body}")

# A custom role reaches SmolLM2's ChatML template.
r = client.chat.completions.create(model=model, messages=[{"role": "narrator", "content": "It was night."}] + ask, max_tokens=2,
                                   extra_body={"prompt_logprobs": 0})
toks = "".join(e[next(iter(e))]["decoded_token"] for e in r.model_extra["prompt_logprobs"][1:])
check("narrator\nIt was night." in toks, f"custom role: {toks!r}")

print(json.dumps({"ok": not failures, "failures": failures, "report": report}))
