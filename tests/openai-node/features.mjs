// The newer features through the official OpenAI Node SDK on a live Sluice
// server: logprobs in a stream, a json_schema response_format, a required
// tool call accumulated from the stream, the Responses streaming helper
// (client.responses.stream), and back into a dropped Responses stream
// (responses.retrieve with starting_after). Exit status 0 when every check
// passes; one JSON line of results on stdout either way.
//
//   SLUICE_URL=http://127.0.0.1:8080 node features.mjs
import OpenAI from "openai";

const baseURL = (process.env.SLUICE_URL ?? "http://127.0.0.1:8080") + "/v1";
const client = new OpenAI({ baseURL, apiKey: "none", maxRetries: 0 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); return ok; };
const results = {};

// 1. Logprobs in a stream: one entry per token, the tokens' bytes join into
// the content exactly, the greedy token is its step's most likely, and the
// alternatives come most likely first.
{
  const stream = client.chat.completions.stream({
    messages: [{ role: "user", content: "Name three colors." }],
    max_tokens: 24, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  let chunksWithLogprobs = 0;
  stream.on("chunk", (chunk) => { if (chunk.choices[0]?.logprobs?.content?.length) chunksWithLogprobs++; });
  const done = await stream.finalChatCompletion();
  const choice = done.choices[0];
  const entries = choice.logprobs?.content ?? [];
  const bytes = entries.flatMap((e) => e.bytes ?? []);
  const joined = Buffer.from(bytes).toString("utf8");
  check(entries.length > 0, "logprobs: no entries");
  check(chunksWithLogprobs > 0, "logprobs: no chunk carried logprobs");
  check(joined === choice.message.content, `logprobs: bytes join to ${JSON.stringify(joined)}, content ${JSON.stringify(choice.message.content)}`);
  for (const [i, e] of entries.entries()) {
    const top = e.top_logprobs ?? [];
    if (!check(top.length === 3, `logprobs: token ${i} has ${top.length} alternatives`)) break;
    check(top[0].token === e.token && top[0].logprob === e.logprob, `logprobs: token ${i} ${e.token} is not the most likely ${top[0].token}`);
    check(top.every((a, j) => j === 0 || a.logprob <= top[j - 1].logprob), `logprobs: token ${i} alternatives out of order`);
    check(e.logprob <= 0, `logprobs: token ${i} logprob ${e.logprob} > 0`);
  }
  results.logprobs = { tokens: entries.length, text: choice.message.content, first: entries[0] };
}

// 2. A json_schema response_format, streamed: the content parses and meets
// the schema (required fields, types, the enum, nothing else).
{
  const schema = { type: "object", properties: { name: { type: "string", maxLength: 20 }, age: { type: "integer" },
    city: { enum: ["Paris", "Rome", "Oslo"] } }, required: ["name", "age", "city"], additionalProperties: false };
  const stream = client.chat.completions.stream({
    messages: [{ role: "user", content: "Describe a person living in a European city." }],
    max_tokens: 120, temperature: 0, response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema } },
  });
  const done = await stream.finalChatCompletion();
  const text = done.choices[0].message.content;
  let v = null;
  try { v = JSON.parse(text); } catch (e) { check(false, `json_schema: ${JSON.stringify(text)}: ${e}`); }
  if (v) {
    check(typeof v.name === "string" && v.name.length <= 20 && Number.isInteger(v.age) && ["Paris", "Rome", "Oslo"].includes(v.city) &&
      Object.keys(v).length === 3, `json_schema: ${text} does not meet the schema`);
  }
  check(done.choices[0].finish_reason === "stop", `json_schema: finish_reason ${done.choices[0].finish_reason}`);
  results.json_schema = text;
}

// 3. A required tool call accumulated from the stream by the helper.
{
  const tools = [{ type: "function", function: { name: "get_weather", description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 30 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city", "unit"], additionalProperties: false } } }];
  const stream = client.chat.completions.stream({
    messages: [{ role: "user", content: "What is the weather in Oslo?" }],
    tools, tool_choice: "required", max_tokens: 100, temperature: 0,
  });
  let argDeltas = 0;
  stream.on("chunk", (chunk) => { for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) if (d.function?.arguments) argDeltas++; });
  const done = await stream.finalChatCompletion();
  const calls = done.choices[0].message.tool_calls ?? [];
  check(done.choices[0].finish_reason === "tool_calls", `tool: finish_reason ${done.choices[0].finish_reason}`);
  if (check(calls.length >= 1, `tool: ${calls.length} calls`)) {
    let args = null;
    try { args = JSON.parse(calls[0].function.arguments); } catch (e) { check(false, `tool: arguments ${calls[0].function.arguments}: ${e}`); }
    check(calls[0].function.name === "get_weather" && args && typeof args.city === "string" && ["celsius", "fahrenheit"].includes(args.unit),
      `tool: ${calls[0].function.name}(${calls[0].function.arguments})`);
  }
  check(argDeltas > 1, `tool: arguments came in ${argDeltas} fragments, not streamed`);
  results.tool = calls.map((c) => `${c.function.name}(${c.function.arguments})`);
}

// 4. The Responses streaming helper: typed events in order, the deltas join
// into the final response's output_text, usage counted.
{
  const stream = client.responses.stream({ input: "Say hello in French.", max_output_tokens: 24, temperature: 0 });
  let deltas = "", types = [];
  stream.on("response.output_text.delta", (e) => { deltas += e.delta; });
  let ended = null; // the response of the last event: the helper's snapshot takes only response.completed's
  stream.on("event", (e) => {
    if (!types.includes(e.type)) types.push(e.type);
    if (e.type === "response.completed" || e.type === "response.incomplete") ended = e.response;
  });
  const final = await stream.finalResponse();
  // The helper's final response has no output_text convenience field (only
  // responses.create adds it): join the output's text parts.
  const text = (final.output ?? []).flatMap((o) => o.content ?? []).filter((c) => c.type === "output_text").map((c) => c.text).join("");
  check(text.length > 0 && text === deltas, `responses: output text ${JSON.stringify(text)}, deltas ${JSON.stringify(deltas)}`);
  check(types[0] === "response.created" && (types.at(-1) === "response.completed" || types.at(-1) === "response.incomplete"),
    `responses: events ${types.join(",")}`);
  const u = ended?.usage;
  check(u?.output_tokens > 0 && u.total_tokens === u.input_tokens + u.output_tokens, "responses: usage adds up");
  check(ended?.status === "completed" || (ended?.status === "incomplete" && ended.incomplete_details?.reason === "max_output_tokens"),
    `responses: status ${ended?.status}`);
  results.responses = { text, status: ended?.status, usage: u, events: types };
}

// 5. Back into a dropped Responses stream the SDK's own way:
// responses.retrieve(id, {stream: true, starting_after}) after the client
// broke off at the third delta gives the events after it, their sequence
// numbers going on, and the text of an uninterrupted greedy run.
{
  const params = { input: "Tell me a story about a cat.", max_output_tokens: 40, temperature: 0, store: false, stream: true };
  let whole = "";
  for await (const e of await client.responses.create(params)) if (e.type === "response.output_text.delta") whole += e.delta;
  let id = null, seq = -1, text = "", deltas = 0;
  for await (const e of await client.responses.create(params)) {
    if (e.type === "response.created") id = e.response.id;
    check(e.sequence_number === seq + 1, `resume: sequence_number ${e.sequence_number} after ${seq}`);
    seq = e.sequence_number;
    if (e.type === "response.output_text.delta") { text += e.delta; if (++deltas === 3) break; } // the SDK aborts the request
  }
  let lastType = null;
  for await (const e of await client.responses.retrieve(id, { stream: true, starting_after: seq })) {
    check(e.sequence_number === seq + 1, `resume: sequence_number ${e.sequence_number} after ${seq}`);
    seq = e.sequence_number;
    lastType = e.type;
    if (e.type === "response.output_text.delta") text += e.delta;
  }
  check(text === whole && whole.length > 0, `resume: ${JSON.stringify(text)}, uninterrupted ${JSON.stringify(whole)}`);
  check(lastType === "response.completed" || lastType === "response.incomplete", `resume: last event ${lastType}`);
  results.resume = { id, events: seq + 1, text };
}

console.log(JSON.stringify({ ok: failures.length === 0, failures, ...results }));
process.exit(failures.length === 0 ? 0 : 1);
