// Streams chat completions from a running Sluice server through the official
// OpenAI SDK and checks what a real client sees. Exit status 0 when every
// check passes; one JSON line of results on stdout either way.
//
//   SLUICE_URL=http://127.0.0.1:8080 node stream.mjs
import OpenAI from "openai";

const baseURL = (process.env.SLUICE_URL ?? "http://127.0.0.1:8080") + "/v1";
const client = new OpenAI({ baseURL, apiKey: process.env.SLUICE_API_KEY ?? "none", maxRetries: 0 });
const failures = [];
const check = (ok, what) => { if (!ok) failures.push(what); };
const results = {};

// 1. A streamed chat completion with usage: role first, text, finish reason, usage, no U+FFFD.
{
  const t0 = performance.now();
  let ttft = null, text = "", role = null, finish = null, usage = null, chunks = 0;
  const stream = await client.chat.completions.create({
    messages: [{ role: "user", content: "Say hello in Japanese, then add an emoji." }],
    max_tokens: 40, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta?.role) role = c.delta.role;
      if (c.delta?.content) { ttft ??= performance.now() - t0; text += c.delta.content; }
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check(role === "assistant", "first chunk names the assistant role");
  check(text.length > 0, "some text arrived");
  check(!text.includes("\uFFFD"), "no U+FFFD in the text");
  check(finish === "stop" || finish === "length", `finish_reason is stop or length (got ${finish})`);
  check(usage && usage.completion_tokens > 0 && usage.total_tokens === usage.prompt_tokens + usage.completion_tokens, "usage adds up");
  results.stream = { chunks, ttft_ms: Math.round(ttft), text, finish, usage };
}

// 2. Aborting mid-stream ends the iteration cleanly on the client side.
{
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { messages: [{ role: "user", content: "Count from one to one hundred in words." }], max_tokens: 200, stream: true },
    { signal: controller.signal },
  );
  let pieces = 0, aborted = false;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content && ++pieces === 3) controller.abort();
    }
    aborted = controller.signal.aborted; // the SDK ends the iteration quietly
  } catch (e) {
    aborted = e instanceof OpenAI.APIUserAbortError || e.name === "AbortError";
  }
  check(aborted && pieces === 3, `abort after 3 pieces ends the stream (pieces ${pieces}, aborted ${aborted})`);
  results.abort = { pieces, aborted };
}

// 3. Errors before the first byte map to the SDK's typed errors.
{
  let status = null, code = null;
  try {
    await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }], stream: true });
  } catch (e) {
    status = e.status; code = e.code;
  }
  check(status === 404 && code === "model_not_found", `unknown model is 404 model_not_found (got ${status} ${code})`);
  results.error = { status, code };
}

// 4. The models list names what the server serves.
{
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  check(models.length > 0, "models.list is not empty");
  results.models = models;
}

console.log(JSON.stringify({ ok: failures.length === 0, failures, ...results }));
process.exit(failures.length === 0 ? 0 : 1);
