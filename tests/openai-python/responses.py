"""Drives a live Sluice server's Responses API through the official OpenAI
Python SDK (pinned by the Go test that runs this) and prints one JSON line:
{"ok": bool, "failures": [...], ...}. The checks are what a user of
client.responses relies on: the streaming helper's typed events and final
response, create() equal to the stream (greedy), previous_response_id
continuing a stored conversation, retrieve/delete, max_output_tokens as an
incomplete response, and refusals as the SDK's BadRequestError."""
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


ask = "What is the capital of France?"

with client.responses.stream(model="", input=ask, instructions="Answer in one word.", max_output_tokens=24) as s:
    types = []
    deltas = []
    for ev in s:
        types.append(ev.type)
        if ev.type == "response.output_text.delta":
            deltas.append(ev.delta)
    final = s.get_final_response()
text = "".join(deltas)
report["stream_text"] = text
order = [t for i, t in enumerate(types) if i == 0 or types[i - 1] != t]
want = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
check(order == want, f"stream: events {order}")
check(text.strip() != "" and final.output_text == text, f"stream: final {final.output_text!r} vs deltas {text!r}")
check(final.status == "completed" and final.id.startswith("resp_"), f"stream: {final.status} {final.id}")
check(final.usage.output_tokens >= len(deltas) and final.usage.input_tokens > 0, f"stream: usage {final.usage}")

made = client.responses.create(model="", input=ask, instructions="Answer in one word.", max_output_tokens=24, temperature=0)
check(made.output_text == text, f"create: {made.output_text!r} differs from the stream {text!r}")

# A conversation continued from the stored response: the model sees its own answer.
follow = client.responses.create(model="", input="Repeat your last answer exactly.", previous_response_id=made.id, max_output_tokens=24)
check(follow.previous_response_id == made.id and follow.output_text.strip() != "", f"follow: {follow.previous_response_id} {follow.output_text!r}")
check(follow.usage.input_tokens > made.usage.input_tokens + made.usage.output_tokens - 8,
      f"follow: input {follow.usage.input_tokens} does not hold the previous turn ({made.usage})")
got = client.responses.retrieve(made.id)
check(got.id == made.id and got.output_text == made.output_text, f"retrieve: {got.id} {got.output_text!r}")
client.responses.delete(made.id)
try:
    client.responses.retrieve(made.id)
    failures.append("retrieve after delete: found")
except openai.NotFoundError:
    pass

short = client.responses.create(model="", input="Count from 1 to 100.", max_output_tokens=3)
check(short.status == "incomplete" and short.incomplete_details.reason == "max_output_tokens" and short.usage.output_tokens == 3,
      f"incomplete: {short.status} {short.incomplete_details} {short.usage}")

# Reasoning on a model that does not reason (SmolLM2): accepted, echoed,
# no reasoning item, 0 reasoning tokens.
r = client.responses.create(model="", input=ask, max_output_tokens=5, reasoning={"effort": "high", "summary": "auto"},
                            include=["reasoning.encrypted_content"], store=False)
check(r.reasoning.effort == "high" and all(it.type != "reasoning" for it in r.output)
      and r.usage.output_tokens_details.reasoning_tokens == 0, f"reasoning: {r.reasoning} {r.output} {r.usage}")
try:
    client.responses.create(model="", input=ask, reasoning={"effort": "extreme"})
    failures.append("reasoning.effort extreme: accepted")
except openai.BadRequestError as e:
    check(e.body["param"] == "reasoning.effort", f"reasoning: {e.body}")
try:
    client.responses.create(model="", input=ask, previous_response_id="resp_unknown")
    failures.append("unknown previous_response_id: accepted")
except openai.BadRequestError as e:
    check(e.body["param"] == "previous_response_id", f"previous: {e.body}")

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
