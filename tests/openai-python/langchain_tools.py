"""One agent-framework tool round trip: LangChain's ChatOpenAI (langchain-openai,
pinned by the Go test that runs this) bound to a Python function, against a
live server on the default model. The model must call the tool (tool_choice
"required"), LangChain parses the call into a tool invocation whose
arguments the function accepts, the result goes back as a ToolMessage and
the model answers. Prints {"ok", "failures", ...}."""
import json
import os

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

failures = []


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return json.dumps({"city": city, "temperature": 21, "sky": "sunny"})


llm = ChatOpenAI(base_url=os.environ["SLUICE_URL"] + "/v1", api_key="unused", model=os.environ["SLUICE_MODEL"], temperature=0, max_tokens=80, max_retries=0)
messages = [HumanMessage("What is the weather in Paris?")]
ai = llm.bind_tools([get_weather], tool_choice="required", parallel_tool_calls=False).invoke(messages)
calls = ai.tool_calls
if len(calls) != 1 or calls[0]["name"] != "get_weather" or not isinstance(calls[0]["args"].get("city"), str):
    failures.append(f"tool calls {calls!r}, invalid {ai.invalid_tool_calls!r}")
else:
    result = get_weather.invoke(calls[0]["args"])
    messages += [ai, ToolMessage(result, tool_call_id=calls[0]["id"])]
    final = llm.bind_tools([get_weather]).invoke(messages)
    if not isinstance(final.content, str) or (not final.content and not final.tool_calls):
        failures.append(f"final answer {final!r}")
    print(json.dumps({"ok": not failures, "failures": failures, "call": calls[0], "answer": final.content}))
    raise SystemExit(0)
print(json.dumps({"ok": False, "failures": failures}))
