"""n choices and completions prompt lists through the official OpenAI Python SDK (pinned by
the Go test that runs this) on a live server; prints {"ok", "failures", ...}. A user of n
relies on: n choices indexed 0..n-1, the same choices again for the same seed, streamed
chunks that join per index into the whole response's choices, usage counting the prompt
once, and a prompt list giving index = prompt*n + j. The stream cut mid-way at the end is
checked on the Go side: every KV block back in the pool."""
import json
import os
import sys

import openai

client = openai.OpenAI(base_url=os.environ["SLUICE_URL"] + "/v1", api_key="unused", max_retries=0)
failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)


ask = [{"role": "user", "content": "Name a colour."}]
kw = dict(model="", messages=ask, max_tokens=8, temperature=1.0, seed=1234)
r = client.chat.completions.create(n=3, **kw)
check([c.index for c in r.choices] == [0, 1, 2], f"indexes {[c.index for c in r.choices]}")
texts = [c.message.content for c in r.choices]
report["texts"] = texts
check(len(set(texts)) > 1, f"three seeds, one text: {texts}")
one = client.chat.completions.create(n=1, **kw)
check(one.choices[0].message.content == texts[0], f"n=1 with the seed {one.choices[0].message.content!r} != choice 0 {texts[0]!r}")
check(r.usage.prompt_tokens == one.usage.prompt_tokens, f"prompt counted {r.usage.prompt_tokens}, alone {one.usage.prompt_tokens}")
check(3 <= r.usage.completion_tokens <= 24 and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, f"usage {r.usage}")
again = client.chat.completions.create(n=3, **kw)
check([c.message.content for c in again.choices] == texts, "the same seed gave other choices")

joined, finish = {}, {}
usage = None
for chunk in client.chat.completions.create(n=3, stream=True, stream_options={"include_usage": True}, **kw):
    if chunk.usage:
        usage = chunk.usage
    for c in chunk.choices:
        joined[c.index] = joined.get(c.index, "") + (c.delta.content or "")
        if c.finish_reason:
            finish[c.index] = c.finish_reason
check(sorted(joined) == [0, 1, 2] and sorted(finish) == [0, 1, 2], f"streamed indexes {sorted(joined)}, finished {sorted(finish)}")
check([joined.get(i) for i in range(3)] == texts, f"streamed {joined} != whole {texts}")
check(usage is not None and usage.completion_tokens == r.usage.completion_tokens, f"streamed usage {usage}")

c = client.completions.create(model="", prompt=["The sky is", "Grass is"], n=2, max_tokens=4, temperature=0, echo=True)
check([ch.index for ch in c.choices] == [0, 1, 2, 3], f"completions indexes {[ch.index for ch in c.choices]}")
check(all(ch.text.startswith("The sky is") for ch in c.choices[:2]) and all(ch.text.startswith("Grass is") for ch in c.choices[2:]),
      f"echo per prompt: {[ch.text for ch in c.choices]}")
check(c.choices[0].text == c.choices[1].text, "greedy choices of one prompt differ")
ids = client.completions.create(model="", prompt=[[504, 3474, 314], [504, 3474, 314]], max_tokens=4, temperature=0)
check(len(ids.choices) == 2 and ids.choices[0].text == ids.choices[1].text, f"token-id prompts {ids.choices}")
st = {}
for chunk in client.completions.create(model="", prompt=["The sky is", "Grass is"], n=2, max_tokens=4, temperature=0, echo=True, stream=True):
    for ch in chunk.choices:
        st[ch.index] = st.get(ch.index, "") + ch.text
check([st.get(i) for i in range(4)] == [ch.text for ch in c.choices], f"streamed completions {st}")

# Logprobs per choice: each choice's own tokens, offsets from its own text.
lc = client.completions.create(model="", prompt=["The sky is", "Grass is"], n=2, max_tokens=4, temperature=1.0, seed=7, logprobs=2)
for ch in lc.choices:
    lp = ch.logprobs
    check("".join(lp.tokens) == ch.text and lp.text_offset[:1] == [0] and len(lp.token_logprobs) == len(lp.tokens),
          f"completions choice {ch.index} logprobs {lp.tokens} for {ch.text!r}")
lr = client.chat.completions.create(n=2, logprobs=True, top_logprobs=2, **kw)
for ch in lr.choices:
    joined = b"".join(bytes(e.bytes) for e in ch.logprobs.content).decode("utf-8", "replace")
    check(joined == ch.message.content, f"chat choice {ch.index} logprobs join to {joined!r}, content {ch.message.content!r}")

# Constrained choices: each has its own constraint state and still validates.
schema = {"type": "object", "properties": {"c": {"enum": ["red", "blue", "green"]}}, "required": ["c"], "additionalProperties": False}
sr = client.chat.completions.create(model="", messages=ask, n=3, max_tokens=40, temperature=1.0, seed=3,
                                    response_format={"type": "json_schema", "json_schema": {"name": "c", "schema": schema}})
for ch in sr.choices:
    try:
        check(json.loads(ch.message.content)["c"] in ("red", "blue", "green"), f"choice {ch.index}: {ch.message.content!r}")
    except (ValueError, KeyError, TypeError) as e:
        failures.append(f"constrained choice {ch.index} {ch.finish_reason}: {ch.message.content!r}: {e}")

# Forced tool calls: each choice parses its own calls (its own ToolStream and constraint).
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}]
tkw = dict(model="", messages=[{"role": "user", "content": "What is the weather in Paris?"}], tools=tools,
           tool_choice="required", parallel_tool_calls=False, n=2, max_tokens=120, temperature=1.0, seed=11)
tr = client.chat.completions.create(**tkw)
for ch in tr.choices:
    calls = ch.message.tool_calls or []
    check(ch.finish_reason == "tool_calls" and len(calls) == 1 and calls[0].function.name == "get_weather"
          and "city" in json.loads(calls[0].function.arguments), f"tool choice {ch.index}: {ch.finish_reason} {calls}")
args, tfinish = {}, {}
for chunk in client.chat.completions.create(stream=True, **tkw):
    for ch in chunk.choices:
        for tc in ch.delta.tool_calls or []:
            args[ch.index] = args.get(ch.index, "") + (tc.function.arguments or "")
        if ch.finish_reason:
            tfinish[ch.index] = ch.finish_reason
check(tfinish == {0: "tool_calls", 1: "tool_calls"}, f"streamed tool finishes {tfinish}")
check([args.get(i) for i in range(2)] == [c.message.tool_calls[0].function.arguments for c in tr.choices],
      f"streamed tool arguments {args}")

for bad in (0, 17):
    try:
        client.chat.completions.create(n=bad, **kw)
        failures.append(f"n={bad} accepted")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "n", f"n={bad}: {e.body}")

# A stream cut after a few chunks: the Go side checks every block comes back. ignore_eos:
# a choice that ended by itself before the cut (a one-word colour) would not be aborted.
with client.chat.completions.create(model="", messages=ask, n=3, max_tokens=200, temperature=1.0, stream=True,
                                    extra_body={"ignore_eos": True}) as s:
    for i, _ in enumerate(s):
        if i >= 4:
            break

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
