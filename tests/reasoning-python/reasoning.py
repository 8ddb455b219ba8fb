"""Reasoning through the official SDKs against a model that always reasons:
SmolLM2 served with a template that opens <think> in the generation prompt
(DeepSeek-R1 style) and --reasoning-format think-tags, so all it writes is
reasoning until the budget makes it close. Run by server/e2e
TestReasoningSDKs with SLUICE_URL and CLOSE_TOKENS (the closing marker's
token count). Prints {"ok": ..., "failures": [...], ...}."""
import json
import os

import anthropic
import openai

url = os.environ["SLUICE_URL"]
close_tokens = int(os.environ["CLOSE_TOKENS"])
# The end-of-turn tokens banned, so the model would reason all the tokens
# it may (ignore_eos would deliver them instead, uncounted by the budget:
# the engine commits no end-of-generation token to a constraint).
no_eos = {"logit_bias": {i: -100 for i in os.environ["EOG_IDS"].split(",")}}
failures, report = [], {}


def check(cond, what):
    if not cond:
        failures.append(what)


oa = openai.OpenAI(base_url=url + "/v1", api_key="none")
an = anthropic.Anthropic(base_url=url, api_key="none")
count = [{"role": "user", "content": "Count from 1 to 300, one number per line."}]
ask = [{"role": "user", "content": "What is the capital of France?"}]

# Chat: reasoning_effort minimal is a 256-token budget; unable to end its
# turn the model would reason all 300 tokens, so it is made to close its
# reasoning at the budget and answer with the rest.
r = oa.chat.completions.create(model="", messages=count, max_tokens=300, temperature=0, reasoning_effort="minimal",
                               extra_body=no_eos)
m = r.choices[0].message
reasoning = (m.model_extra or {}).get("reasoning_content") or ""
rt = r.usage.completion_tokens_details.reasoning_tokens
report["chat_reasoning_tokens"] = rt
check(reasoning and (m.model_extra or {}).get("reasoning") == reasoning, f"chat: reasoning {m.model_extra}")
check(rt == 256 + close_tokens, f"chat: {rt} reasoning tokens, want the budget 256 + {close_tokens} (the closing marker)")
check(m.content and "<think>" not in reasoning and "</think>" not in reasoning + m.content, f"chat: markers leaked or no answer: {m}")
s = oa.chat.completions.create(model="", messages=count, max_tokens=300, temperature=0, reasoning_effort="minimal",
                               stream=True, stream_options={"include_usage": True}, extra_body=no_eos)
sr, sc, su = "", "", None
for ch in s:
    if ch.usage:
        su = ch.usage
    for c in ch.choices:
        sr += (c.delta.model_extra or {}).get("reasoning_content") or ""
        sc += c.delta.content or ""
check(sr == reasoning and sc == (m.content or ""), "chat: streamed reasoning/content differ from the whole reply")
check(su and su.completion_tokens_details.reasoning_tokens == rt, f"chat: streamed usage {su}")
r = oa.chat.completions.create(model="", messages=ask, max_tokens=20, temperature=0, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
check(not (r.choices[0].message.model_extra or {}).get("reasoning_content") and r.usage.completion_tokens_details.reasoning_tokens == 0,
      f"chat: enable_thinking false still reasoned: {r.choices[0].message}")

# Messages: a thinking block with a signature, streamed alike, sent back.
msg = an.messages.create(model="", max_tokens=40, messages=ask, thinking={"type": "adaptive"}, extra_body={"temperature": 0})
th = [b for b in msg.content if b.type == "thinking"]
check(len(th) == 1 and th[0].thinking and th[0].signature.startswith("sluice1.")
      and all(b.type != "redacted_thinking" for b in msg.content), f"messages: {msg.content}")
with an.messages.stream(model="", max_tokens=40, messages=ask, thinking={"type": "adaptive"}, extra_body={"temperature": 0}) as st:
    final = st.get_final_message()
fth = [b for b in final.content if b.type == "thinking"]
check(fth and th and fth[0].thinking == th[0].thinking and fth[0].signature, f"messages stream: {final.content}")
nxt = an.messages.create(model="", max_tokens=5, messages=ask + [{"role": "assistant", "content": [b.model_dump() for b in msg.content]},
                                                                   {"role": "user", "content": "And of Spain?"}])
check(nxt.stop_reason in ("end_turn", "max_tokens"), f"messages round trip: {nxt}")

# Responses: a reasoning item with its summary and encrypted_content, sent
# back by a stateless client.
resp = oa.responses.create(model="", input=ask, max_output_tokens=40, temperature=0, store=False,
                           reasoning={"effort": "high", "summary": "auto"}, include=["reasoning.encrypted_content"])
ri = [it for it in resp.output if it.type == "reasoning"]
check(len(ri) == 1 and ri[0].summary and ri[0].summary[0].text and ri[0].encrypted_content
      and resp.usage.output_tokens_details.reasoning_tokens > 0, f"responses: {resp.output} {resp.usage}")
nxt = oa.responses.create(model="", store=False, max_output_tokens=5, include=["reasoning.encrypted_content"],
                          input=ask + [it.model_dump(exclude_none=True) for it in resp.output] + [{"role": "user", "content": "And of Spain?"}])
check(nxt.status in ("completed", "incomplete"), f"responses round trip: {nxt.status}")

print(json.dumps({"ok": not failures, "failures": failures, **report}, default=str))
