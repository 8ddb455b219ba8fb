// Tool calls through the official OpenAI Node SDK's streaming helper
// (client.chat.completions.stream, which accumulates tool-call deltas into
// finalChatCompletion) on a live Sluice server. Exit status 0 when every
// check passes; one JSON line of results on stdout either way.
//
//   SLUICE_URL=http://127.0.0.1:8080 node tools.mjs
import OpenAI from "openai";

const baseURL = (process.env.SLUICE_URL ?? "http://127.0.0.1:8080") + "/v1";
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };
const results = {};

const tools = [
  { type: "function", function: { name: "get_weather", description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 30 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "get_time", description: "Current time in a timezone",
    parameters: { type: "object", properties: { tz: { type: "string", maxLength: 30 } }, required: ["tz"], additionalProperties: false } } },
];

for (const [label, tool_choice] of [["required", "required"], ["named", { type: "function", function: { name: "get_time" } }]]) {
  const stream = client.chat.completions.stream({
    messages: [{ role: "user", content: "What is the weather like in Paris today?" }],
    tools, tool_choice, parallel_tool_calls: false, max_tokens: 120, temperature: 0,
  });
  let nameSeenAlone = false;
  stream.on("chunk", (chunk) => {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
      if (d.id) nameSeenAlone = d.function?.name?.length > 0 && d.function?.arguments === "";
    }
  });
  const done = await stream.finalChatCompletion();
  const choice = done.choices[0];
  const calls = choice.message.tool_calls ?? [];
  results[label] = calls.map((c) => `${c.function.name}(${c.function.arguments})`);
  check(choice.finish_reason === "tool_calls", `${label}: finish_reason ${choice.finish_reason}`);
  check(nameSeenAlone, `${label}: the first delta did not carry the name alone`);
  if (check(calls.length === 1, `${label}: ${calls.length} calls`)) {
    const c = calls[0];
    if (label === "named") check(c.function.name === "get_time", `named: called ${c.function.name}`);
    let args = null;
    try { args = JSON.parse(c.function.arguments); } catch (e) { check(false, `${label}: arguments ${c.function.arguments}: ${e}`); }
    if (args && c.function.name === "get_weather") {
      check(typeof args.city === "string" && ["celsius", "fahrenheit"].includes(args.unit) && Object.keys(args).length === 2, `${label}: ${c.function.arguments}`);
    } else if (args) {
      check(c.function.name === "get_time" && typeof args.tz === "string" && Object.keys(args).length === 1, `${label}: ${c.function.name}(${c.function.arguments})`);
    }
  }
}

console.log(JSON.stringify({ ok: failures.length === 0, failures, ...results }));
process.exit(failures.length === 0 ? 0 : 1);
