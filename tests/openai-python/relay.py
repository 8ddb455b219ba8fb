"""Drives a relay-mode Sluice (SLUICE_URL) in front of a Sluice upstream
(SLUICE_DIRECT) through the official OpenAI Python SDK's Responses API and
prints one JSON line: {"ok": bool, "failures": [...], ...}. Through the relay
client.responses.stream must see what a direct client sees (greedy): the
typed events in order, the text, the status and usage; max_output_tokens
ends it as incomplete; the relay keeps its responses itself: retrieve by id
(and the stream again, starting_after a sequence number), delete, and
previous_response_id continuing the conversation as a direct client's
continuation does (the same greedy text and input tokens)."""
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

got = relay.responses.retrieve(made.id)
check(got.id == made.id and got.output_text == made.output_text and got.store, f"retrieve: {got.id} {got.output_text!r} {got.store}")
again = [ev for ev in relay.responses.retrieve(rfinal.id, stream=True, starting_after=2)]
check(again and again[0].sequence_number == 3 and again[-1].type == "response.completed"
      and again[-1].response.output_text == rtext, f"retrieve stream: {[(e.sequence_number, e.type) for e in again][:4]}")

follow = "And of Spain?"
dfirst = direct.responses.create(model="", input=ask, max_output_tokens=24, temperature=0)
rfirst = relay.responses.create(model="", input=ask, max_output_tokens=24, temperature=0)
dnext = direct.responses.create(model="", input=follow, previous_response_id=dfirst.id, max_output_tokens=24, temperature=0)
rnext = relay.responses.create(model="", input=follow, previous_response_id=rfirst.id, max_output_tokens=24, temperature=0)
report["continued"], report["continued_direct"] = rnext.output_text, dnext.output_text
report["continued_input_tokens"] = [rnext.usage.input_tokens, dnext.usage.input_tokens]
check(rfirst.output_text == dfirst.output_text and rnext.output_text == dnext.output_text and rnext.output_text.strip() != "",
      f"previous_response_id: relayed {rnext.output_text!r}, direct {dnext.output_text!r}")
check(rnext.previous_response_id == rfirst.id and rnext.usage.input_tokens == dnext.usage.input_tokens > rfirst.usage.input_tokens,
      f"previous_response_id: {rnext.previous_response_id} usage {rnext.usage} vs {dnext.usage}")
with relay.responses.stream(model="", input=follow, previous_response_id=rfirst.id, max_output_tokens=24, temperature=0) as s:
    last = list(s)[-1]  # 24 tokens may cut it: response.incomplete, which get_final_response refuses
check(last.type in ("response.completed", "response.incomplete") and last.response.output_text == dnext.output_text
      and last.response.status == dnext.status, f"previous_response_id streamed: {last.type} {last.response.output_text!r}")

unkept = relay.responses.create(model="", input=ask, max_output_tokens=4, store=False)
for name, fn in [("retrieve store=false", lambda: relay.responses.retrieve(unkept.id)),
                 ("retrieve after delete", lambda: (relay.responses.delete(made.id), relay.responses.retrieve(made.id)))]:
    try:
        fn()
        failures.append(name + ": found")
    except openai.NotFoundError:
        pass
try:
    relay.responses.create(model="", input=ask, previous_response_id=unkept.id)
    failures.append("previous_response_id of a store=false response: accepted")
except openai.BadRequestError as e:
    check(e.body["param"] == "previous_response_id", f"previous store=false: {e.body}")

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
