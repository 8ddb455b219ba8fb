"""Tool calls and structured outputs through the official OpenAI Python SDK
(pinned by the Go test that runs this, with jsonschema) on a live server with
the default model; prints one JSON line {"ok", "failures", ...}. What an agent
relies on: streamed tool-call deltas accumulate into calls whose arguments
parse and validate against the tool's parameters (tool_choice "required" and
a named function), finish_reason "tool_calls", the same call whole and
streamed; response_format json_schema output that validates against its
schema, for SCHEMAS generated schemas."""
import json
import os
import random

import jsonschema
import openai

from sluice_tools import accumulate, ask, chat_tools, check, client_args, failures, report, schemas, valid_arguments

client = openai.OpenAI(**client_args(suffix="/v1"))
tools = chat_tools()
params = schemas
ask = [{"role": "user", "content": ask}]


for label, choice in [("required", "required"), ("named", {"type": "function", "function": {"name": "get_time"}})]:
    calls, content, finish, first, _ = accumulate(client.chat.completions.create(
        model="", messages=ask, tools=tools, tool_choice=choice, parallel_tool_calls=False,
        max_tokens=120, temperature=0, stream=True))
    report[label] = calls
    check(finish == "tool_calls", f"{label}: finish_reason {finish!r}")
    check(content.strip() == "", f"{label}: content {content!r} beside the call")
    if check(len(calls) == 1, f"{label}: {len(calls)} calls"):
        c = calls[0]
        check(c["id"] and c["name"] in params, f"{label}: call {c}")
        check(first.get(0) == (c["name"], ""), f"{label}: first delta {first.get(0)} is not the name alone")
        if label == "named":
            check(c["name"] == "get_time", f"named: called {c['name']}")
        valid_arguments(label, c["name"], c["arguments"])
        whole = client.chat.completions.create(model="", messages=ask, tools=tools, tool_choice=choice,
                                               parallel_tool_calls=False, max_tokens=120, temperature=0)
        m = whole.choices[0].message
        check(whole.choices[0].finish_reason == "tool_calls" and m.tool_calls and len(m.tool_calls) == 1
              and m.tool_calls[0].function.name == c["name"] and m.tool_calls[0].function.arguments == c["arguments"],
              f"{label}: non-streamed {m} differs from streamed {c}")

# The agent loop's second turn: the call and its result go back, the model answers.
call = report.get("required", [{}])[0]
if call.get("id"):
    follow = ask + [{"role": "assistant", "content": None, "tool_calls": [
        {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"temperature": 21, "sky": "sunny"})}]
    r = client.chat.completions.create(model="", messages=follow, tools=tools, max_tokens=40, temperature=0)
    report["second_turn"] = r.choices[0].message.content
    check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"second turn: {r.choices[0]}")


def gen_schema(rng, depth=0):
    props = {}
    for i in range(rng.randint(1, 4 if depth else 5)):
        kind = rng.choice(["string", "integer", "number", "boolean", "enum", "array", "object" if depth == 0 else "integer"])
        name = f"{kind[:3]}_{i}"
        if kind == "string":
            props[name] = {"type": "string", "maxLength": rng.randint(3, 16)}
        elif kind == "integer":
            lo = rng.randint(-100, 100)
            props[name] = {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 1000)}
        elif kind == "number":
            props[name] = {"type": "number"}
        elif kind == "boolean":
            props[name] = {"type": "boolean"}
        elif kind == "enum":
            props[name] = {"enum": rng.sample(["red", "green", "blue", "cyan", 1, 2, None, True], rng.randint(1, 4))}
        elif kind == "array":
            props[name] = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "maxItems": rng.randint(0, 4)}
        else:
            props[name] = gen_schema(rng, depth + 1)
    required = [k for k in props if rng.random() < 0.8]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


rng = random.Random(13)
n = int(os.environ.get("SCHEMAS", "50"))
valid, truncated = 0, 0
for i in range(n):
    schema = gen_schema(rng)
    kw = dict(model="", messages=[{"role": "user", "content": "Describe something as JSON."}], max_tokens=300,
              temperature=0.7, seed=i, response_format={"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema, "strict": True}})
    if i % 2:
        text, finish = "", None
        for chunk in client.chat.completions.create(stream=True, **kw):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
    else:
        r = client.chat.completions.create(**kw)
        text, finish = r.choices[0].message.content, r.choices[0].finish_reason
    if finish == "length":
        # max_tokens cut the document. JSON Schema puts no bound on a number's
        # digits, and a 135M model sampling at 0.7 can loop inside one; the
        # constraint must still have held, so the text is a document cut at
        # its very end, not a malformed one.
        try:
            json.loads(text)
            check(False, f"schema {i}: a whole document ended by length: {text!r}")
        except json.JSONDecodeError as e:
            check(e.pos == len(text), f"schema {i}: malformed before the cut at {e.pos} of {len(text)}: {text!r}")
        truncated += 1
        continue
    try:
        check(finish == "stop", f"schema {i}: finish {finish!r}")
        jsonschema.validate(json.loads(text), schema)
        valid += 1
    except Exception as e:  # noqa: BLE001
        check(False, f"schema {i} {json.dumps(schema)}: {text!r}: {e}")
check(truncated <= n // 25, f"{truncated} of {n} documents cut by max_tokens")
report["schemas_valid"] = f"{valid}/{n}"
report["schemas_cut_by_length"] = truncated

# An invalid schema is the SDK's BadRequestError, before any token.
try:
    client.chat.completions.create(model="", messages=ask, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nosuch"}}})
    check(False, "invalid schema accepted")
except openai.BadRequestError as e:
    check("nosuch" in str(e), f"invalid schema error: {e}")

print(json.dumps({"ok": not failures, "failures": failures, **report}))
