"""Reads a chat completions stream (SLUICE_URL) through the official OpenAI
Python SDK while the server sends keep-alive comments between id'd events,
and prints one JSON line: {"ok": bool, "text": ..., "error": ...}. The SDK's
decoder keeps the last event id, so a keep-alive framed as a comment and a
blank line after an id'd event reached it as an event with empty data, which
it failed to parse as JSON; Sluice's keep-alive is framed so it does not."""
import json
import os
import sys

import openai

client = openai.OpenAI(base_url=os.environ["SLUICE_URL"] + "/v1", api_key="unused", max_retries=0)
report = {"ok": False, "text": "", "error": None}
try:
    chunks = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
    report["text"] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    report["ok"] = True
except Exception as e:  # the failure this checks is a JSONDecodeError inside the SDK
    report["error"] = f"{type(e).__name__}: {e}"
print(json.dumps(report))
sys.exit(0 if report["ok"] else 1)
