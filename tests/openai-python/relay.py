"""Drives a relay-mode Sluice (SLUICE_URL) in front of a Sluice upstream
(SLUICE_DIRECT) through the official OpenAI Python SDK's Responses API and
prints one JSON line: {"ok": bool, "failures": [...], ...}. Through the relay
client.responses.stream must see what a direct client sees (greedy): the
typed events in order, the text, the status and usage; max_output_tokens
ends it as incomplete; previous_response_id is refused (the upstream keeps
the conversation under its own id)."""
import json
import os
import sys

import openai

relay = openai.OpenAI(base_url=os.environ["SLUICE_URL"] + "/v1", api_key="unused", max_retries=0)
direct = openai.OpenAI(base_url=os.environ["SLUICE_DIRECT"] + "/v1", api_key="unused", max_retries=0)
failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)


def stream(client, **kw):
    with client.responses.stream(model="", temperature=0, **kw) as s:
        types, deltas = [], []
        for ev in s:
            types.append(ev.type)
            if ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
        final = s.get_final_response()
    return types, "".join(deltas), final


ask = "What is the capital of France?"
rtypes, rtext, rfinal = stream(relay, input=ask, instructions="Answer in one word.", max_output_tokens=24)
_, dtext, dfinal = stream(direct, input=ask, instructions="Answer in one word.", max_output_tokens=24)
report["relayed"], report["direct"] = rtext, dtext
order = [t for i, t in enumerate(rtypes) if i == 0 or rtypes[i - 1] != t]
want = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
check(order == want, f"stream: events {order}")
check(rtext.strip() != "" and rtext == dtext and rfinal.output_text == rtext, f"stream: relayed {rtext!r} (final {rfinal.output_text!r}), direct {dtext!r}")
check(rfinal.status == dfinal.status == "completed" and rfinal.id.startswith("resp_"), f"stream: {rfinal.status} {rfinal.id}")
check(rfinal.usage.input_tokens == dfinal.usage.input_tokens > 0 and rfinal.usage.output_tokens == dfinal.usage.output_tokens,
      f"stream: usage {rfinal.usage} vs {dfinal.usage}")

made = relay.responses.create(model="", input=ask, instructions="Answer in one word.", max_output_tokens=24, temperature=0)
check(made.output_text == rtext and made.status == "completed", f"create: {made.output_text!r} {made.status}")

short = relay.responses.create(model="", input="Count from 1 to 100.", max_output_tokens=3)
check(short.status == "incomplete" and short.incomplete_details.reason == "max_output_tokens" and short.usage.output_tokens == 3,
      f"incomplete: {short.status} {short.incomplete_details} {short.usage}")

try:
    relay.responses.create(model="", input=ask, previous_response_id=made.id)
    failures.append("previous_response_id: accepted")
except openai.BadRequestError as e:
    check(e.body["param"] == "previous_response_id" and e.body["code"] == "unsupported_parameter", f"previous: {e.body}")

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
