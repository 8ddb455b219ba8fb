"""llama-server's output constraints through the official OpenAI Python SDK
(pinned by the Go test that runs this), sent as extra_body as its users do,
on a live server with the default model; prints {"ok", "failures", ...}.
grammar (GBNF) and json_schema on chat and completions, response_format
json_object with a schema, streamed and not; an invalid grammar, two
grammars at once and an unknown field are 400s naming the field."""
import json
import os
import re

import openai

client = openai.OpenAI(base_url=os.environ["SLUICE_URL"] + "/v1", api_key="unused", max_retries=0)
model = os.environ.get("SLUICE_MODEL", "")
failures = []
report = {}


def check(cond, what):
    if not cond:
        failures.append(what)


ask = [{"role": "user", "content": "Say something."}]
person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def is_person(text):
    try:
        v = json.loads(text)
    except ValueError:
        return False
    return isinstance(v, dict) and set(v) == {"name", "age"} and isinstance(v["name"], str) and isinstance(v["age"], int)


def chat(extra, stream):
    if stream:
        text, finish = "", None
        for c in client.chat.completions.create(model=model, messages=ask, max_tokens=60, temperature=0.8, seed=5,
                                                stream=True, extra_body=extra):
            if c.choices and c.choices[0].delta.content:
                text += c.choices[0].delta.content
            if c.choices and c.choices[0].finish_reason:
                finish = c.choices[0].finish_reason
        return text, finish
    r = client.chat.completions.create(model=model, messages=ask, max_tokens=60, temperature=0.8, seed=5, extra_body=extra)
    return r.choices[0].message.content, r.choices[0].finish_reason


def complete(extra, stream):
    if stream:
        text, finish = "", None
        for c in client.completions.create(model=model, prompt="Once upon a time", max_tokens=60, temperature=0.8, seed=5,
                                           stream=True, extra_body=extra):
            if c.choices:
                text += c.choices[0].text
                finish = c.choices[0].finish_reason or finish
        return text, finish
    r = client.completions.create(model=model, prompt="Once upon a time", max_tokens=60, temperature=0.8, seed=5, extra_body=extra)
    return r.choices[0].text, r.choices[0].finish_reason


cases = [
    ("grammar a{5}", {"grammar": 'root ::= "a"{5,5}'}, lambda t: t == "aaaaa"),
    ("grammar recursive", {"grammar": 'root ::= "(" inner ")"\ninner ::= [a-z] | "(" inner ")"'},
     lambda t: re.fullmatch(r"(\()+[a-z](\))+", t) is not None and t.count("(") == t.count(")")),
    ("json_schema", {"json_schema": person}, is_person),
]
for name, extra, ok in cases:
    for endpoint, run in (("chat", chat), ("completions", complete)):
        for stream in (False, True):
            text, finish = run(extra, stream)
            report[f"{name} {endpoint} stream={stream}"] = text
            check(ok(text) and finish == "stop", f"{name} {endpoint} stream={stream}: {text!r} finish {finish}")
for stream in (False, True):
    text, finish = chat({"response_format": {"type": "json_object", "schema": person}}, stream)
    report[f"response_format json_object schema stream={stream}"] = text
    check(is_person(text) and finish == "stop", f"response_format json_object+schema stream={stream}: {text!r} {finish}")


def refused(extra, param, words, stream=False):
    try:
        chat(extra, stream)
        failures.append(f"{extra} accepted")
    except openai.BadRequestError as e:
        err = e.body if isinstance(e.body, dict) else {}
        check(err.get("param") == param and all(w in err.get("message", "") for w in words), f"{extra}: {e.body}")


for stream in (False, True):
    refused({"grammar": 'root ::= "a'}, "grammar", ["grammar", "line 1", "unexpected end of input"], stream)
    refused({"grammar": 'root ::= "a"', "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": person}}},
            "grammar", ["response_format", "grammar"], stream)
    refused({"n_predict": 5}, "n_predict", ["n_predict", "lenient-fields"], stream)

print(json.dumps({"ok": not failures, "failures": failures, "report": report}))
