"""Tool use on the Messages API through the official Anthropic Python SDK
(pinned by the Go test that runs this, with jsonschema) on a live server with
the default model; prints one JSON line {"ok", "failures", ...}. What an
agent relies on: messages.create with tools and tool_choice any (or a named
tool) returns a tool_use block whose input validates against its
input_schema, stop_reason tool_use; messages.stream's input_json_delta
fragments accumulate into the final message's tool_use input; the tool_use
and its tool_result go back and the model answers; count_tokens counts the
tools; Anthropic's own tools are refused naming the field."""
import json

import anthropic

from sluice_tools import anthropic_tools, ask, check, client_args, failures, report, schemas, valid_input

client = anthropic.Anthropic(**client_args())
tools = anthropic_tools()
ask = [{"role": "user", "content": ask}]


def valid_use(label, block):
    if not check(block.type == "tool_use" and block.name in schemas and block.id.startswith("toolu_"), f"{label}: block {block}"):
        return False
    return valid_input(label, block.name, block.input)


uses = {}
for label, choice in [("any", {"type": "any", "disable_parallel_tool_use": True}), ("named", {"type": "tool", "name": "get_time"})]:
    m = client.messages.create(model="", max_tokens=120, extra_body={"temperature": 0}, tools=tools, tool_choice=choice, messages=ask)
    blocks = [b for b in m.content if b.type == "tool_use"]
    report[label] = [b.model_dump() for b in m.content]
    check(m.stop_reason == "tool_use", f"{label}: stop_reason {m.stop_reason}")
    # disable_parallel_tool_use holds "any" to one call; "named" may make several.
    one = choice.get("disable_parallel_tool_use", False)
    if check(len(blocks) == 1 if one else len(blocks) >= 1, f"{label}: {len(blocks)} tool_use blocks in {m.content}") \
            and all(valid_use(label, b) for b in blocks):
        uses[label] = m
        if label == "named":
            check(all(b.name == "get_time" for b in blocks), f"named: used {[b.name for b in blocks]}")
            check(len({b.id for b in blocks}) == len(blocks), f"named: ids repeat {[b.id for b in blocks]}")

# Streamed through the helper: input_json_delta fragments join to the input.
with client.messages.stream(model="", max_tokens=120, extra_body={"temperature": 0}, tools=tools,
                            tool_choice={"type": "any", "disable_parallel_tool_use": True}, messages=ask) as s:
    partial, starts, names = {}, {}, []
    for ev in s:
        names.append(ev.type)
        if ev.type == "content_block_start" and ev.content_block.type == "tool_use":
            starts[ev.index] = ev.content_block
        elif ev.type == "content_block_delta" and ev.delta.type == "input_json_delta":
            check(ev.index in starts, f"stream: a delta before its block: {ev}")
            partial[ev.index] = partial.get(ev.index, "") + ev.delta.partial_json
    final = s.get_final_message()
report["stream_events"] = sorted(set(names))
blocks = [b for b in final.content if b.type == "tool_use"]
if check(len(blocks) == 1 and len(partial) == 1, f"stream: blocks {final.content} partial {partial}"):
    idx = next(iter(partial))
    check(json.loads(partial[idx]) == blocks[0].input, f"stream: joined {partial[idx]!r} vs final {blocks[0].input!r}")
    check(starts[idx].id == blocks[0].id and starts[idx].name == blocks[0].name, f"stream: start {starts[idx]} vs {blocks[0]}")
    check(names.count("content_block_delta") >= 2, "stream: the input came in one delta")
    valid_use("stream", blocks[0])
    if "any" in uses:
        whole = [b for b in uses["any"].content if b.type == "tool_use"][0]
        check(whole.input == blocks[0].input and whole.name == blocks[0].name, f"stream {blocks[0]} vs whole {whole}")
check(final.stop_reason == "tool_use", f"stream: stop_reason {final.stop_reason}")
check(names[-1] == "message_stop", f"stream: last event {names[-1:]}")

# The agent loop's second turn: the tool_use and its tool_result go back.
if "any" in uses:
    m = uses["any"]
    use = [b for b in m.content if b.type == "tool_use"][0]
    follow = ask + [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                  "content": json.dumps({"temperature": 21, "sky": "sunny"})}]}]
    r = client.messages.create(model="", max_tokens=40, extra_body={"temperature": 0}, tools=tools, messages=follow)
    report["second_turn"] = [b.model_dump() for b in r.content]
    check(r.stop_reason in ("end_turn", "max_tokens", "tool_use") and r.content, f"second turn: {r}")
    n_with = client.messages.count_tokens(model="", tools=tools, messages=follow).input_tokens
    n_without = client.messages.count_tokens(model="", messages=ask).input_tokens
    # Anthropic's sum: the prompt is input + cache_read + cache_creation.
    prompt = r.usage.input_tokens + (r.usage.cache_read_input_tokens or 0) + (r.usage.cache_creation_input_tokens or 0)
    check(n_with == prompt and n_with > n_without, f"count_tokens {n_with} vs usage {r.usage}, {n_without} without")

# Refusals in Anthropic's shape, naming the field.
for label, kw, param in [
    ("client tool", {"tools": [{"type": "bash_20250124", "name": "bash"}]}, "tools[0].type"),
    ("no schema", {"tools": [{"name": "f"}]}, "tools[0].input_schema"),
    ("unknown tool", {"tools": tools, "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice.name"),
]:
    try:
        client.messages.create(model="", max_tokens=5, messages=ask, **kw)
        failures.append(f"{label}: accepted")
    except anthropic.BadRequestError as e:
        check(e.body["error"]["type"] == "invalid_request_error" and e.body["error"]["param"] == param, f"{label}: {e.body}")

print(json.dumps({"ok": not failures, "failures": failures, **report}, default=str))
