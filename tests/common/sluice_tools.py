"""What the SDK tool scripts of tests/openai-python and tests/anthropic-python
share: the check list every script reports as {"ok", "failures", ...}, the
chat stream's tool-call accumulation, the two tools an agent is offered
(get_weather, get_time) in each API's shape, and validation of a call's
arguments against its tool's schema. The Go runner (server/e2e pyCmd) puts
tests/common on PYTHONPATH; by hand:
PYTHONPATH=tests/common SLUICE_URL=... python tests/openai-python/tools.py."""
import json
import os

import jsonschema

failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def client_args(var="SLUICE_URL", suffix=""):
    """An SDK client's keywords for the server named by env var: no key is
    checked, and no retries, which would hide a failed request."""
    return dict(base_url=os.environ[var] + suffix, api_key="unused", max_retries=0)


weather = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                            "unit": {"enum": ["celsius", "fahrenheit"]}},
           "required": ["city", "unit"], "additionalProperties": False}
clock = {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 30}},
         "required": ["tz"], "additionalProperties": False}
schemas = {"get_weather": weather, "get_time": clock}
descriptions = {"get_weather": "Current weather in a city", "get_time": "Current time in a timezone"}
ask = "What is the weather like in Paris today?"


def chat_tools():
    return [{"type": "function", "function": {"name": n, "description": descriptions[n], "parameters": s}}
            for n, s in schemas.items()]


def responses_tools(**extra):
    return [{"type": "function", "name": n, "description": descriptions[n], "parameters": s, **extra}
            for n, s in schemas.items()]


def anthropic_tools():
    return [{"name": n, "description": descriptions[n], "input_schema": s} for n, s in schemas.items()]


def accumulate(stream):
    """Joins a chat stream's tool-call deltas by index as an SDK user does:
    the calls, the content, the finish_reason, each call's first delta's
    (name, arguments), and the usage (prompt, completion) if a chunk
    carried it."""
    calls, content, finish, first, usage = {}, "", None, {}, None
    for chunk in stream:
        if chunk.usage:
            usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
        if not chunk.choices:
            continue
        ch = chunk.choices[0]
        content += ch.delta.content or ""
        for d in ch.delta.tool_calls or []:
            c = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
            if d.id:
                c["id"] = d.id
                first[d.index] = (d.function.name, d.function.arguments) if d.function else (None, None)
            if d.function and d.function.name:
                c["name"] += d.function.name
            if d.function and d.function.arguments:
                c["arguments"] += d.function.arguments
        finish = ch.finish_reason or finish
    return [calls[i] for i in sorted(calls)], content, finish, first, usage


def valid_arguments(label, name, arguments):
    """A call's JSON arguments text parses and validates against its tool's
    schema; the failure, if any, is the finding."""
    try:
        jsonschema.validate(json.loads(arguments), schemas[name])
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        return check(False, f"{label}: arguments {arguments!r}: {e}")
    return True


def valid_input(label, name, value):
    """A tool_use block's input (already an object) validates against its
    tool's schema."""
    try:
        jsonschema.validate(value, schemas[name])
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        return check(False, f"{label}: input {value!r}: {e}")
    return True
