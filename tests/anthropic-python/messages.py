"""Drives a live Sluice server through the official Anthropic Python SDK
(pinned by the Go test that runs this) and prints one JSON line:
{"ok": bool, "failures": [...], ...}. Each check is what a user switching
servers relies on: the streaming helper's events and final message, the
non-streaming message, stop sequences, count_tokens, errors as SDK
exceptions, and the x-api-key header the SDK sends."""
import json
import os
import sys

import anthropic

url = os.environ["SLUICE_URL"]
key = os.environ.get("SLUICE_KEY", "unused")
client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)


ask = [{"role": "user", "content": "What is the capital of France?"}]

# Streaming through the helper: text_stream, the event types, get_final_message.
with client.messages.stream(model="", max_tokens=24, system="Answer in one word.", messages=ask) as s:
    pieces = list(s.text_stream)
    final = s.get_final_message()
text = "".join(pieces)
report["stream_text"] = text
check(len(pieces) >= 1 and text.strip() != "", "stream: no text")
check(final.content[0].type == "text" and final.content[0].text == text, "stream: final message text differs from the deltas")
check(final.stop_reason in ("end_turn", "max_tokens"), f"stream: stop_reason {final.stop_reason}")
check(final.usage.output_tokens >= len(pieces) and final.usage.input_tokens > 0, f"stream: usage {final.usage}")
check(final.id.startswith("msg_") and final.role == "assistant", f"stream: message {final.id} {final.role}")

# Raw events, in order.
names = [e.type for e in client.messages.create(model="", max_tokens=8, messages=ask, stream=True)]
report["events"] = names
check(names[0] == "message_start" and names[1] == "content_block_start", f"events start {names[:2]}")
check(names[-3:] == ["content_block_stop", "message_delta", "message_stop"], f"events end {names[-3:]}")
check("content_block_delta" in names, "events: no content_block_delta")

# Not streaming; greedy, so it equals the streamed answer for the same request.
m = client.messages.create(model="", max_tokens=24, system="Answer in one word.", messages=ask, extra_body={"temperature": 0})
check(m.content[0].text == text, f"create: {m.content[0].text!r} differs from the stream {text!r}")
check(m.type == "message" and m.stop_reason == final.stop_reason, f"create: {m.type} {m.stop_reason}")

# max_tokens reached, then a stop sequence cut out of the text.
m = client.messages.create(model="", max_tokens=3, messages=[{"role": "user", "content": "Count: 1, 2, 3, 4, 5,"}])
check(m.stop_reason == "max_tokens" and m.usage.output_tokens == 3, f"max_tokens: {m.stop_reason} {m.usage}")
full = client.messages.create(model="", max_tokens=16, messages=[{"role": "user", "content": "Write the numbers from 1 to 10."}])
words = full.content[0].text.split()
if len(words) >= 3:
    stop = words[2]
    cut = client.messages.create(model="", max_tokens=16, stop_sequences=[stop],
                                 messages=[{"role": "user", "content": "Write the numbers from 1 to 10."}])
    check(cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop, f"stop: {cut.stop_reason} {cut.stop_sequence}")
    check(stop not in cut.content[0].text and full.content[0].text.startswith(cut.content[0].text),
          f"stop: {cut.content[0].text!r} vs {full.content[0].text!r}")
else:
    failures.append(f"stop: too few words to pick a stop sequence: {full.content[0].text!r}")

# count_tokens agrees with the usage of a message on the same prompt.
n = client.messages.count_tokens(model="", system="Answer in one word.", messages=ask)
check(n.input_tokens == final.usage.input_tokens, f"count_tokens {n.input_tokens} vs usage {final.usage.input_tokens}")

# A server tool (Anthropic runs it on its side) is left out of the model's tools and reported.
r = client.messages.create(model="", max_tokens=5, messages=ask, tools=[{"type": "web_search_20250305", "name": "web_search"}])
warnings = r.model_dump().get("sluice_warnings") or []
check(len(warnings) == 1 and warnings[0].startswith("tools[0]: web_search_20250305"), f"server tool: warnings {warnings}")
# Errors arrive as the SDK's typed exceptions; fields the server cannot honour are refused:
# a client tool whose schema is Anthropic's own.
try:
    client.messages.create(model="", max_tokens=5, messages=ask, tools=[{"type": "bash_20250124", "name": "bash"}])
    failures.append("client tool: accepted")
except anthropic.BadRequestError as e:
    check(e.body["error"]["type"] == "invalid_request_error" and e.body["error"]["param"] == "tools[0].type", f"client tool: {e.body}")
# Reasoning controls on a model that does not reason (SmolLM2): accepted,
# no thinking block.
r = client.messages.create(model="", max_tokens=5, messages=ask, output_config={"effort": "high"},
                           thinking={"type": "adaptive", "display": "omitted"})
check(r.content and all(b.type == "text" for b in r.content), f"effort + adaptive thinking: {r.content}")
r = client.messages.create(model="", max_tokens=5, messages=ask, thinking={"type": "disabled"})
check(all(b.type == "text" for b in r.content), f"thinking disabled: {r.content}")
try:
    client.messages.create(model="", max_tokens=5, messages=ask, thinking={"type": "enabled", "budget_tokens": 1024})
    failures.append("budget_tokens over max_tokens: accepted")
except anthropic.BadRequestError as e:
    check(e.body["error"]["param"] == "thinking.budget_tokens", f"budget: {e.body}")
try:
    client.messages.create(model="no-such-model", max_tokens=5, messages=ask)
    failures.append("unknown model: accepted")
except anthropic.NotFoundError as e:
    check(e.body["error"]["type"] == "not_found_error", f"model: {e.body}")
if os.environ.get("SLUICE_KEY"):
    try:
        anthropic.Anthropic(base_url=url, api_key="wrong", max_retries=0).messages.create(model="", max_tokens=5, messages=ask)
        failures.append("wrong key: accepted")
    except anthropic.AuthenticationError as e:
        check(e.body["error"]["type"] == "authentication_error", f"auth: {e.body}")

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
