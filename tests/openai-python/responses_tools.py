"""Tools and text.format on the Responses API through the official OpenAI
Python SDK (pinned by the Go test that runs this, with jsonschema) on a live
server with the default model; prints one JSON line {"ok", "failures", ...}.
What an agent relies on: client.responses.create with tools and
tool_choice required (or a named function) returns a function_call item
whose arguments validate against the tool's parameters;
client.responses.stream's function_call_arguments deltas accumulate into the
final response's arguments; the call and its function_call_output go back
(in the input, or through previous_response_id) and the model answers;
text.format json_schema output validates against its schema; hosted tools
are refused naming the field."""
import json

import jsonschema
import openai

from sluice_tools import ask, check, client_args, failures, report, responses_tools, schemas, valid_arguments

client = openai.OpenAI(**client_args(suffix="/v1"))
tools = responses_tools(strict=True)
params = schemas


def valid_call(label, item):
    if not check(item.type == "function_call" and item.name in params, f"{label}: item {item}"):
        return False
    check(item.call_id and item.id and item.status == "completed", f"{label}: call ids/status {item}")
    return valid_arguments(label, item.name, item.arguments)


# Whole responses: required, then a named function.
calls = {}
for label, choice in [("required", "required"), ("named", {"type": "function", "name": "get_time"})]:
    r = client.responses.create(model="", input=ask, tools=tools, tool_choice=choice, parallel_tool_calls=False,
                                max_output_tokens=120, temperature=0)
    fcs = [o for o in r.output if o.type == "function_call"]
    report[label] = [o.model_dump() for o in r.output]
    check(r.status == "completed", f"{label}: status {r.status}")
    if check(len(fcs) == 1, f"{label}: {len(fcs)} function_call items in {r.output}") and valid_call(label, fcs[0]):
        calls[label] = (r, fcs[0])
        if label == "named":
            check(fcs[0].name == "get_time", f"named: called {fcs[0].name}")

# Streamed: the SDK's helper; the deltas accumulate into the final arguments.
with client.responses.stream(model="", input=ask, tools=tools, tool_choice="required", parallel_tool_calls=False,
                             max_output_tokens=120, temperature=0) as s:
    added, deltas, done, names = {}, {}, {}, []
    for ev in s:
        names.append(ev.type)
        if ev.type == "response.output_item.added" and ev.item.type == "function_call":
            added[ev.output_index] = ev.item
            check(ev.item.name in params and ev.item.arguments == "", f"stream: added {ev.item}")
        elif ev.type == "response.function_call_arguments.delta":
            check(ev.output_index in added, f"stream: a delta before its item: {ev}")
            deltas[ev.output_index] = deltas.get(ev.output_index, "") + ev.delta
        elif ev.type == "response.function_call_arguments.done":
            done[ev.output_index] = ev.arguments
    final = s.get_final_response()
report["stream_events"] = sorted(set(names))
fcs = [o for o in final.output if o.type == "function_call"]
if check(len(fcs) == 1 and list(added) == [0], f"stream: items {final.output} added {added}"):
    check(deltas.get(0) == done.get(0) == fcs[0].arguments, f"stream: deltas {deltas} done {done} final {fcs[0].arguments!r}")
    check(len([n for n in names if n == "response.function_call_arguments.delta"]) >= 2, "stream: arguments came in one delta")
    valid_call("stream", fcs[0])
    # Greedy: the stream's call is the whole response's.
    if "required" in calls:
        check(fcs[0].arguments == calls["required"][1].arguments, f"stream {fcs[0].arguments!r} vs whole {calls['required'][1].arguments!r}")
check(names[-1] == "response.completed", f"stream: last event {names[-1:]}")

# The agent loop's second turn, both ways back.
if "required" in calls:
    first, call = calls["required"]
    result = json.dumps({"temperature": 21, "sky": "sunny"})
    r = client.responses.create(model="", previous_response_id=first.id, tools=tools, max_output_tokens=40, temperature=0,
                                input=[{"type": "function_call_output", "call_id": call.call_id, "output": result}])
    report["second_turn_previous"] = r.output_text
    check(r.status in ("completed", "incomplete") and r.output, f"previous_response_id turn: {r.status} {r.output}")
    r2 = client.responses.create(model="", tools=tools, max_output_tokens=40, temperature=0,
                                 input=[{"role": "user", "content": ask}, call.model_dump(exclude_none=True),
                                        {"type": "function_call_output", "call_id": call.call_id, "output": result}])
    check(r2.status in ("completed", "incomplete") and r2.output, f"input items turn: {r2.status} {r2.output}")
    check(r2.output_text == r.output_text, f"input items turn {r2.output_text!r} differs from previous_response_id's {r.output_text!r}")

# text.format json_schema: whole and streamed, the text validates.
person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
          "required": ["name", "age"], "additionalProperties": False}
fmt = {"format": {"type": "json_schema", "name": "person", "schema": person, "strict": True}}
r = client.responses.create(model="", input="Invent a person.", text=fmt, max_output_tokens=80, temperature=0)
report["json_schema"] = r.output_text
try:
    jsonschema.validate(json.loads(r.output_text), person)
except Exception as e:  # noqa: BLE001
    check(False, f"json_schema: {r.output_text!r}: {e}")
check(r.text.format.type == "json_schema", f"json_schema: echoed format {r.text}")
with client.responses.stream(model="", input="Invent a person.", text=fmt, max_output_tokens=80, temperature=0) as s:
    streamed = "".join(ev.delta for ev in s if ev.type == "response.output_text.delta")
check(streamed == r.output_text, f"json_schema stream {streamed!r} vs whole {r.output_text!r}")
r = client.responses.create(model="", input="Describe Paris as JSON.", text={"format": {"type": "json_object"}}, max_output_tokens=60, temperature=0)
try:
    check(isinstance(json.loads(r.output_text), dict) or r.status == "incomplete", f"json_object: {r.output_text!r}")
except ValueError:
    check(r.status == "incomplete", f"json_object: {r.output_text!r} does not parse")

# A hosted tool is left out of the model's tools and reported, not refused.
r = client.responses.create(model="", input="x", max_output_tokens=5, tools=[{"type": "web_search"}] + tools)
warnings = (r.model_extra or {}).get("sluice_warnings") or []
check(len(warnings) == 1 and "tools[0]" in warnings[0], f"hosted tool: sluice_warnings {warnings}")

# Refusals as BadRequestError naming the field.
for label, kw, param in [
    ("bad schema", {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "nonsense"}}}}, "text.format.schema"),
    ("unknown function", {"tools": tools, "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name"),
]:
    try:
        client.responses.create(model="", input="x", max_output_tokens=5, **kw)
        failures.append(f"{label}: accepted")
    except openai.BadRequestError as e:
        check(e.body.get("param") == param, f"{label}: {e.body}")

print(json.dumps({"ok": not failures, "failures": failures, **report}, default=str))
