"""Drives a relay-mode Sluice (SLUICE_URL) in front of a Sluice upstream
(SLUICE_DIRECT) through the official Anthropic Python SDK and prints one JSON
line: {"ok": bool, "failures": [...], ...}. Through the relay the streaming
helper must see what a direct client sees (greedy): the text, the stop
reason, the usage; a stop sequence given by the client and max_tokens end
the stream as they do directly; refusals are the SDK's typed exceptions."""
import json
import os
import sys

import anthropic

relay = anthropic.Anthropic(base_url=os.environ["SLUICE_URL"], api_key="unused", max_retries=0)
direct = anthropic.Anthropic(base_url=os.environ["SLUICE_DIRECT"], api_key="unused", max_retries=0)
failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)


def stream(client, **kw):
    with client.messages.stream(model="", extra_body={"temperature": 0}, **kw) as s:
        pieces = list(s.text_stream)
        final = s.get_final_message()
    return "".join(pieces), final


ask = [{"role": "user", "content": "What is the capital of France?"}]
rtext, rfinal = stream(relay, max_tokens=24, system="Answer in one word.", messages=ask)
dtext, dfinal = stream(direct, max_tokens=24, system="Answer in one word.", messages=ask)
report["relayed"], report["direct"] = rtext, dtext
check(rtext.strip() != "" and rtext == dtext, f"stream: relayed {rtext!r}, direct {dtext!r}")
check(rfinal.content[0].text == rtext, "stream: final message text differs from the deltas")
check(rfinal.stop_reason == dfinal.stop_reason, f"stream: stop_reason {rfinal.stop_reason} vs {dfinal.stop_reason}")
# The prompt is input_tokens + cache_read_input_tokens (Anthropic's sum):
# whichever ran second may have read the first one's prefix from the cache.
def prompt_of(u):
    return u.input_tokens + (u.cache_read_input_tokens or 0)


check(prompt_of(rfinal.usage) == prompt_of(dfinal.usage) > 0 and rfinal.usage.output_tokens == dfinal.usage.output_tokens,
      f"stream: usage {rfinal.usage} vs {dfinal.usage}")
check(rfinal.id.startswith("msg_") and rfinal.role == "assistant", f"stream: message {rfinal.id} {rfinal.role}")

names = [e.type for e in relay.messages.create(model="", max_tokens=8, messages=ask, stream=True)]
report["events"] = names
check(names[0] == "message_start" and names[1] == "content_block_start", f"events start {names[:2]}")
check(names[-3:] == ["content_block_stop", "message_delta", "message_stop"], f"events end {names[-3:]}")

m = relay.messages.create(model="", max_tokens=24, system="Answer in one word.", messages=ask, extra_body={"temperature": 0})
check(m.content[0].text == rtext and m.stop_reason == rfinal.stop_reason, f"create: {m.content[0].text!r} {m.stop_reason}")

count = [{"role": "user", "content": "Write the numbers from 1 to 10."}]
m = relay.messages.create(model="", max_tokens=3, messages=count, extra_body={"temperature": 0})
check(m.stop_reason == "max_tokens" and m.usage.output_tokens == 3, f"max_tokens: {m.stop_reason} {m.usage}")
full, _ = stream(relay, max_tokens=24, messages=count)
words = full.split()
if len(words) >= 3:
    stop = words[2]
    cut, cfinal = stream(relay, max_tokens=24, messages=count, stop_sequences=[stop])
    check(cfinal.stop_reason == "stop_sequence" and cfinal.stop_sequence == stop, f"stop: {cfinal.stop_reason} {cfinal.stop_sequence}")
    check(stop not in cut and full.startswith(cut), f"stop: {cut!r} vs {full!r}")
else:
    failures.append(f"stop: too few words to pick a stop sequence: {full!r}")

try:
    relay.messages.create(model="no-such-model", max_tokens=5, messages=ask)
    failures.append("unknown model: accepted")
except anthropic.NotFoundError as e:
    check(e.body["error"]["type"] == "not_found_error", f"model: {e.body}")

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
