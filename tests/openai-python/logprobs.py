"""Chat and completions logprobs through the official OpenAI Python SDK (pinned by the Go
test that runs this) on a live server; prints {"ok", "failures", ...}. A user
of logprobs relies on: one entry per token, joined tokens' bytes equal to the
content, values ≤ 0, top_logprobs sorted with the greedy token first, the same
figures streamed and not streamed, and the 0-20 bounds."""
import json
import math
import os
import sys

import openai

client = openai.OpenAI(base_url=os.environ["SLUICE_URL"] + "/v1", api_key="unused", max_retries=0)
failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)


ask = [{"role": "user", "content": "What is the capital of France?"}]
r = client.chat.completions.create(model="", messages=ask, max_tokens=12, temperature=0, logprobs=True, top_logprobs=5)
ch = r.choices[0]
content = ch.logprobs.content
report["text"] = ch.message.content
check(len(content) == r.usage.completion_tokens or (ch.finish_reason == "stop" and len(content) == r.usage.completion_tokens - 1),
      f"{len(content)} entries for {r.usage.completion_tokens} tokens ({ch.finish_reason})")
joined = b"".join(bytes(e.bytes) for e in content).decode("utf-8", "replace")
check(joined == ch.message.content, f"bytes join to {joined!r}, content {ch.message.content!r}")
for e in content:
    check(e.logprob <= 0 and len(e.top_logprobs) == 5, f"entry {e}")
    tops = [t.logprob for t in e.top_logprobs]
    check(tops == sorted(tops, reverse=True), f"top not sorted: {tops}")
    # Greedy: the token chosen is the most likely one.
    check(e.top_logprobs[0].token == e.token and math.isclose(e.top_logprobs[0].logprob, e.logprob, abs_tol=1e-6), f"greedy {e}")
    check(sum(math.exp(t) for t in tops) <= 1.0001, f"probabilities over 1: {tops}")

streamed = []
text = ""
for chunk in client.chat.completions.create(model="", messages=ask, max_tokens=12, temperature=0, logprobs=True, top_logprobs=5, stream=True):
    if chunk.choices and chunk.choices[0].logprobs and chunk.choices[0].logprobs.content:
        streamed += chunk.choices[0].logprobs.content
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
check(text == ch.message.content, f"stream text {text!r}")
check([(e.token, round(e.logprob, 4)) for e in streamed] == [(e.token, round(e.logprob, 4)) for e in content],
      "streamed logprobs differ from the whole response's")

plain = client.chat.completions.create(model="", messages=ask, max_tokens=4, temperature=0)
check(plain.choices[0].logprobs is None, "logprobs without asking")
nolist = client.chat.completions.create(model="", messages=ask, max_tokens=4, temperature=0, logprobs=True)
check(all(e.top_logprobs == [] for e in nolist.choices[0].logprobs.content), "top_logprobs without asking")
for bad in (21, -1):
    try:
        client.chat.completions.create(model="", messages=ask, max_tokens=4, logprobs=True, top_logprobs=bad)
        failures.append(f"top_logprobs {bad} accepted")
    except openai.BadRequestError as e:
        check(e.body["param"] == "top_logprobs", f"top_logprobs {bad}: {e.body}")

# Completions: logprobs N is the sampled token plus N alternatives per token.
prompt = "The capital of France is"
c = client.completions.create(model="", prompt=prompt, max_tokens=8, temperature=0, logprobs=3)
lp = c.choices[0].logprobs
check("".join(lp.tokens) == c.choices[0].text, f"completions tokens {lp.tokens} vs {c.choices[0].text!r}")
check(len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset), "completions: lengths differ")
offsets = [sum(len(t) for t in lp.tokens[:i]) for i in range(len(lp.tokens))]
check(lp.text_offset == offsets, f"text_offset {lp.text_offset}, want {offsets}")
for tok, v, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
    check(v <= 0 and tok in top and 1 <= len(top) <= 4 and max(top.values()) == top[tok], f"completions entry {tok!r} {v} {top}")
st_tokens, st_offsets = [], []
for chunk in client.completions.create(model="", prompt=prompt, max_tokens=8, temperature=0, logprobs=3, stream=True):
    if chunk.choices and chunk.choices[0].logprobs:
        st_tokens += chunk.choices[0].logprobs.tokens
        st_offsets += chunk.choices[0].logprobs.text_offset
check(st_tokens == lp.tokens and st_offsets == lp.text_offset, f"streamed completions logprobs {st_tokens} {st_offsets}")

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
