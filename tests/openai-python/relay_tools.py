"""Tool calls through a relay-mode Sluice (SLUICE_URL) in front of a Sluice
upstream (SLUICE_DIRECT), with the official OpenAI Python SDK (pinned by the
Go test that runs this, with jsonschema); prints one JSON line {"ok",
"failures", ...}. Through the relay an agent must get what a direct client
gets (greedy, tool_choice "required" forces a call): streamed tool-call
deltas that accumulate by index into the same calls, whose arguments parse
and validate; the SDK's chat.completions.stream helper's final completion;
finish_reason tool_calls; the usage; the same calls whole; and the second
turn (the call and its tool result sent back) answered as directly; and
the Responses API's function_call items, streamed and whole."""
import json
import sys

import openai

from sluice_tools import accumulate, ask, chat_tools, check, client_args, failures, report, schemas, valid_arguments

relay = openai.OpenAI(**client_args(suffix="/v1"))
direct = openai.OpenAI(**client_args("SLUICE_DIRECT", "/v1"))
tools = chat_tools()
params = schemas
ask = [{"role": "user", "content": ask}]
kw = dict(model="", messages=ask, tools=tools, tool_choice="required", parallel_tool_calls=False, max_tokens=120, temperature=0)


def strip(calls):
    return [(c["name"], c["arguments"]) for c in calls]  # ids are each generation's own


got = {}
for label, client in [("relayed", relay), ("direct", direct)]:
    got[label] = accumulate(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
rcalls, rcontent, rfinish, _, rusage = got["relayed"]
dcalls, dcontent, dfinish, _, dusage = got["direct"]
report["relayed"], report["direct"] = rcalls, dcalls
check(rfinish == dfinish == "tool_calls", f"stream: finish_reason {rfinish!r} vs {dfinish!r}")
check(len(rcalls) == 1 and strip(rcalls) == strip(dcalls), f"stream: calls {rcalls} vs {dcalls}")
check(rcontent == dcontent, f"stream: content {rcontent!r} vs {dcontent!r}")
check(rusage == dusage and rusage is not None and rusage[1] > 0, f"stream: usage {rusage} vs {dusage}")
for c in rcalls:
    if check(c["id"] and c["name"] in params, f"stream: call {c}"):
        valid_arguments("stream", c["name"], c["arguments"])

# The SDK's streaming helper parses the accumulated calls itself.
with relay.chat.completions.stream(**kw) as s:
    kinds = {ev.type for ev in s}
    final = s.get_final_completion()
m = final.choices[0].message
report["helper_events"] = sorted(kinds)
check(final.choices[0].finish_reason == "tool_calls" and m.tool_calls
      and [(t.function.name, t.function.arguments) for t in m.tool_calls] == strip(rcalls),
      f"helper: final {m} vs streamed {rcalls}")
check("tool_calls.function.arguments.delta" in kinds and "tool_calls.function.arguments.done" in kinds, f"helper: events {kinds}")

# Whole: the calls as the upstream gave them.
whole = relay.chat.completions.create(**kw)
wm = whole.choices[0].message
check(whole.choices[0].finish_reason == "tool_calls" and wm.tool_calls
      and [(t.function.name, t.function.arguments) for t in wm.tool_calls] == strip(rcalls)
      and all(t.id and t.type == "function" for t in wm.tool_calls), f"whole: {wm} vs streamed {rcalls}")

# The second turn: the call and its result go upstream as sent.
if rcalls:
    call = rcalls[0]
    follow = ask + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"temperature": 21, "sky": "sunny"})}]
    answers = [c.chat.completions.create(model="", messages=follow, tools=tools, max_tokens=40, temperature=0).choices[0]
               for c in (relay, direct)]
    report["second_turn"] = answers[0].message.content
    check(answers[0].message.content == answers[1].message.content and answers[0].finish_reason == answers[1].finish_reason,
          f"second turn: relayed {answers[0]} vs direct {answers[1]}")

# The Responses API: function_call items, streamed through the helper and whole.
rtools = [{"type": "function", "name": t["function"]["name"], "description": t["function"]["description"],
           "parameters": t["function"]["parameters"]} for t in tools]
rkw = dict(model="", input=ask[0]["content"], tools=rtools, tool_choice="required", parallel_tool_calls=False,
           max_output_tokens=120, temperature=0)


def fcalls(resp):
    return [(o.name, o.arguments) for o in resp.output if o.type == "function_call"]


finals = []
for c in (relay, direct):
    with c.responses.stream(**rkw) as s:
        args = "".join(ev.delta for ev in s if ev.type == "response.function_call_arguments.delta")
        finals.append((s.get_final_response(), args))
(rresp, rargs), (dresp, _) = finals
report["responses"] = fcalls(rresp)
check(len(fcalls(rresp)) == 1 and fcalls(rresp) == fcalls(dresp) and rresp.status == dresp.status == "completed",
      f"responses stream: {fcalls(rresp)} {rresp.status} vs {fcalls(dresp)} {dresp.status}")
check(fcalls(rresp) and rargs == fcalls(rresp)[0][1] and all(o.call_id for o in rresp.output if o.type == "function_call"),
      f"responses stream: deltas {rargs!r} vs {fcalls(rresp)}")
whole = relay.responses.create(**rkw)
check(fcalls(whole) == fcalls(rresp), f"responses whole: {fcalls(whole)} vs streamed {fcalls(rresp)}")

report["ok"] = not failures
report["failures"] = failures
print(json.dumps(report))
sys.exit(0 if not failures else 1)
