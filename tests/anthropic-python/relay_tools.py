"""Tool use through a relay-mode Sluice (SLUICE_URL) in front of a Sluice
upstream (SLUICE_DIRECT), with the official Anthropic Python SDK (pinned by
the Go test that runs this, with jsonschema); prints one JSON line {"ok",
"failures", ...}. Through the relay messages.stream must give what a direct
client gets (greedy, tool_choice any): a tool_use block whose
input_json_delta fragments join to its input, which validates; stop_reason
tool_use; the usage; the same block from messages.create; and the second
turn (the tool_use and its tool_result sent back) answered as directly."""
import json
import sys

import anthropic

from sluice_tools import anthropic_tools, ask, check, client_args, failures, report, valid_input

relay = anthropic.Anthropic(**client_args())
direct = anthropic.Anthropic(**client_args("SLUICE_DIRECT"))
tools = anthropic_tools()
ask = [{"role": "user", "content": ask}]
kw = dict(model="", max_tokens=120, extra_body={"temperature": 0}, tools=tools,
          tool_choice={"type": "any", "disable_parallel_tool_use": True}, messages=ask)


def stream(client):
    with client.messages.stream(**kw) as s:
        partial, starts = {}, {}
        for ev in s:
            if ev.type == "content_block_start" and ev.content_block.type == "tool_use":
                starts[ev.index] = ev.content_block
            elif ev.type == "content_block_delta" and ev.delta.type == "input_json_delta":
                check(ev.index in starts, f"stream: a delta before its block: {ev}")
                partial[ev.index] = partial.get(ev.index, "") + ev.delta.partial_json
        return s.get_final_message(), partial, starts


def uses(m):
    return [(b.name, b.input) for b in m.content if b.type == "tool_use"]  # ids are each generation's own


rfinal, rpartial, rstarts = stream(relay)
dfinal, _, _ = stream(direct)
report["relayed"], report["direct"] = [b.model_dump() for b in rfinal.content], [b.model_dump() for b in dfinal.content]
check(rfinal.stop_reason == dfinal.stop_reason == "tool_use", f"stream: stop_reason {rfinal.stop_reason} vs {dfinal.stop_reason}")
check(len(uses(rfinal)) == 1 and uses(rfinal) == uses(dfinal), f"stream: {uses(rfinal)} vs {uses(dfinal)}")
# The prompt is input_tokens + cache_read_input_tokens (Anthropic's sum):
# whichever ran second may have read the first one's prefix from the cache.
def prompt_of(u):
    return u.input_tokens + (u.cache_read_input_tokens or 0)


check(prompt_of(rfinal.usage) == prompt_of(dfinal.usage) > 0 and rfinal.usage.output_tokens == dfinal.usage.output_tokens,
      f"stream: usage {rfinal.usage} vs {dfinal.usage}")
blocks = [b for b in rfinal.content if b.type == "tool_use"]
if check(len(blocks) == 1 and len(rpartial) == 1, f"stream: blocks {rfinal.content} partial {rpartial}"):
    b, idx = blocks[0], next(iter(rpartial))
    check(b.id.startswith("toolu_") and rstarts[idx].id == b.id and rstarts[idx].name == b.name, f"stream: start {rstarts[idx]} vs {b}")
    check(json.loads(rpartial[idx]) == b.input, f"stream: joined {rpartial[idx]!r} vs final {b.input!r}")
    valid_input("stream", b.name, b.input)

m = relay.messages.create(**kw)
check(m.stop_reason == "tool_use" and uses(m) == uses(rfinal), f"create: {m.content} {m.stop_reason} vs streamed {uses(rfinal)}")

if blocks:
    b = blocks[0]
    follow = ask + [{"role": "assistant", "content": [{"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": b.id,
                                                  "content": json.dumps({"temperature": 21, "sky": "sunny"})}]}]
    answers = [c.messages.create(model="", max_tokens=40, extra_body={"temperature": 0}, tools=tools, messages=follow)
               for c in (relay, direct)]
    report["second_turn"] = [x.model_dump() for x in answers[0].content]
    check([x.model_dump() for x in answers[0].content if x.type == "text"] == [x.model_dump() for x in answers[1].content if x.type == "text"]
          and answers[0].stop_reason == answers[1].stop_reason, f"second turn: relayed {answers[0].content} vs direct {answers[1].content}")

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
