"""chat_template_kwargs through the official OpenAI Python SDK (pinned by the
Go test that runs this, TestOpenAIPythonTemplateKwargs), sent as vLLM's users
send them (extra_body), on a live server whose chat template reads a persona,
a list and a flag from its kwargs (KWARGS_TEMPLATE in the Go test); prints
{"ok", "failures", ...}. The kwargs reach the template in a whole and a
streamed chat (the prompt shown by prompt_logprobs, and counted in usage),
a template without them renders as without, and a kwarg naming what the
server itself gives the template is a 400 naming it."""
import json
import os

import openai

client = openai.OpenAI(base_url=os.environ["SLUICE_URL"] + "/v1", api_key="unused", max_retries=0)
failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)


ask = [{"role": "user", "content": "Name a color."}]
kwargs = {"persona": "You are a terse painter.", "palette": ["red", "teal"], "shout": True}


def prompt_text(r):
    plp = r.model_extra.get("prompt_logprobs") or []
    return "".join(next(iter(e.values()))["decoded_token"] for e in plp[1:])


r = client.chat.completions.create(model="", messages=ask, max_tokens=3, temperature=0,
                                   extra_body={"chat_template_kwargs": kwargs, "prompt_logprobs": 0})
text = prompt_text(r)
report["prompt"] = text
check("system\nYou are a terse painter.\nPalette: red, teal\nLOUD" in text, f"kwargs not in the prompt: {text!r}")
with_kwargs = r.usage.prompt_tokens

r = client.chat.completions.create(model="", messages=ask, max_tokens=3, temperature=0, extra_body={"prompt_logprobs": 0})
plain = prompt_text(r)
check("painter" not in plain and "Palette" not in plain and "LOUD" not in plain, f"no kwargs, yet {plain!r}")
check(r.usage.prompt_tokens < with_kwargs, f"prompt tokens {r.usage.prompt_tokens} without kwargs, {with_kwargs} with")

# A stream renders the same prompt: the same prompt tokens counted.
usage = None
for c in client.chat.completions.create(model="", messages=ask, max_tokens=3, temperature=0, stream=True,
                                        stream_options={"include_usage": True},
                                        extra_body={"chat_template_kwargs": kwargs}):
    if c.usage:
        usage = c.usage
check(usage is not None and usage.prompt_tokens == with_kwargs, f"streamed usage {usage}, want {with_kwargs} prompt tokens")

# What the server gives the template itself cannot be replaced by a kwarg.
for name, value in [("messages", []), ("add_generation_prompt", False), ("bos_token", "<s>")]:
    try:
        client.chat.completions.create(model="", messages=ask, max_tokens=1,
                                       extra_body={"chat_template_kwargs": {name: value}})
        failures.append(f"chat_template_kwargs.{name} accepted")
    except openai.BadRequestError as e:
        check(isinstance(e.body, dict) and e.body.get("param") == f"chat_template_kwargs.{name}", f"{name}: {e.body}")

# On completions the field applies to nothing.
try:
    client.completions.create(model="", prompt="hi", max_tokens=1, extra_body={"chat_template_kwargs": {"persona": "x"}})
    failures.append("chat_template_kwargs on completions accepted")
except openai.BadRequestError as e:
    check(isinstance(e.body, dict) and e.body.get("param") == "chat_template_kwargs", f"completions: {e.body}")

print(json.dumps({"ok": not failures, "failures": failures, **report}))
