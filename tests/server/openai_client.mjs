// The official openai npm client against `minfer serve` on loopback (tests/cli/serve.sh).
//   node openai_client.mjs PORT
// Prints PASS/FAIL lines; exit status 1 on any failure.  Each call has a timeout and no retries, so a
// server that misbehaves fails the check instead of being papered over by the client.
import OpenAI from "openai";

const port = process.argv[2];
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", timeout: 60000, maxRetries: 0 });
let failed = 0;
const check = (name, cond, why) => {
  if (cond) console.log(`PASS openai: ${name}`);
  else {
    failed++;
    console.log(`FAIL openai: ${name}: ${why}`);
  }
};

const messages = [{ role: "user", content: "Hello" }];

// `node openai_client.mjs PORT embed`: PORT serves --embeddings (tests/cli/serve.sh).  The SDK asks for base64
// unless told otherwise and decodes it; both forms must give the same floats.
if (process.argv[3] === "embed") {
  const input = ["Hello world", "Another text"];
  const b = await client.embeddings.create({ model: "any", input });
  const f = await client.embeddings.create({ model: "any", input, encoding_format: "float" });
  const norm = (v) => Math.sqrt(v.reduce((a, x) => a + x * x, 0));
  check("embeddings.create (the SDK's base64)", b.object === "list" && b.data.length === 2 && b.data[1].index === 1 &&
    b.data.every((d) => d.object === "embedding" && d.embedding.length === 256 && Math.abs(norm(d.embedding) - 1) < 1e-5) &&
    b.usage.prompt_tokens > 0 && b.usage.total_tokens === b.usage.prompt_tokens, JSON.stringify(b).slice(0, 300));
  check("embeddings.create: base64 and float give the same floats",
    f.data.every((d, i) => d.embedding.length === 256 && d.embedding.every((x, k) => Math.fround(x) === b.data[i].embedding[k])),
    JSON.stringify(f.data[0].embedding.slice(0, 4)) + " vs " + JSON.stringify(b.data[0].embedding.slice(0, 4)));
  const d = await client.embeddings.create({ model: "any", input, dimensions: 64 });
  check("embeddings.create: dimensions 64 (Matryoshka) shortens the unit vectors",
    d.data.every((e) => e.embedding.length === 64 && Math.abs(norm(e.embedding) - 1) < 1e-5), JSON.stringify(d).slice(0, 300));
  try {
    await client.embeddings.create({ model: "any", input: "" });
    check("embeddings.create: an empty input is a 400", false, "no error");
  } catch (e) {
    check("embeddings.create: an empty input is a 400", e.status === 400 && /empty string/.test(e.message), String(e));
  }
  process.exit(failed ? 1 : 0);
}

// `node openai_client.mjs PORT tools`: PORT serves mf-genmodel --script's tool caller (tests/cli/serve.sh);
// the SDK reads its call, streamed and not, and takes the conversation back with the tool's result
if (process.argv[3] === "tools") {
  const tools = [{ type: "function", function: { name: "now", description: "The time", parameters: { type: "object", properties: {} } } }];
  const q = [{ role: "user", content: "What time is it?" }];
  const t = await client.chat.completions.create({ model: "any", messages: q, tools, temperature: 0, max_tokens: 40 });
  const call = t.choices[0].message.tool_calls?.[0];
  check("tools: the SDK reads the call", t.choices[0].finish_reason === "tool_calls" && call?.type === "function" &&
    call.function.name === "now" && JSON.stringify(JSON.parse(call.function.arguments)) === "{}", JSON.stringify(t));
  const ts = await client.chat.completions.create({ model: "any", messages: q, tools, temperature: 0, max_tokens: 40, stream: true });
  const acc = {};
  let tfinish = null;
  for await (const chunk of ts) {
    for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
      const a = (acc[d.index] ??= { id: "", name: "", arguments: "" });
      a.id += d.id ?? "", a.name += d.function?.name ?? "", a.arguments += d.function?.arguments ?? "";
    }
    tfinish = chunk.choices[0]?.finish_reason ?? tfinish;
  }
  check("tools: the SDK's stream accumulates the same call", Object.keys(acc).length === 1 && acc[0].name === "now" &&
    acc[0].arguments === call?.function.arguments && tfinish === "tool_calls", JSON.stringify({ acc, tfinish }));
  const back = await client.chat.completions.create({ model: "any", tools, temperature: 0, max_tokens: 40,
    messages: [...q, t.choices[0].message, { role: "tool", tool_call_id: call?.id, content: "12:00" }] });
  check("tools: the answer and the tool's result go back", back.choices[0].finish_reason === "tool_calls", JSON.stringify(back));
  process.exit(failed ? 1 : 0);
}

// chat, not streaming
const r = await client.chat.completions.create({ model: "any", messages, max_tokens: 6, temperature: 0 });
check("chat.completions.create", r.object === "chat.completion" && r.choices[0].message.role === "assistant" &&
  typeof r.choices[0].message.content === "string" && r.choices[0].finish_reason === "length" &&
  r.usage.completion_tokens === 6, JSON.stringify(r));

// chat, streaming, with include_usage: the SDK's iterator sees every chunk, the text equals the non-streamed one
const stream = await client.chat.completions.create({ model: "any", messages, max_tokens: 6, temperature: 0, stream: true,
  stream_options: { include_usage: true } });
let text = "", usage = null, finish = null, n = 0;
for await (const chunk of stream) {
  n++;
  if (chunk.choices.length) {
    text += chunk.choices[0].delta.content ?? "";
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  if (chunk.usage) usage = chunk.usage;
}
check("chat stream concatenates to the same text", text === r.choices[0].message.content, `${JSON.stringify(text)} vs ${JSON.stringify(r.choices[0].message.content)}`);
check("chat stream usage and finish_reason", usage?.completion_tokens === 6 && finish === "length" && n >= 3, JSON.stringify({ usage, finish, n }));

// completions, streaming and not
const c = await client.completions.create({ model: "any", prompt: "The capital of", max_tokens: 5, temperature: 0 });
check("completions.create", c.object === "text_completion" && typeof c.choices[0].text === "string" && c.usage.completion_tokens === 5, JSON.stringify(c));
const cs = await client.completions.create({ model: "any", prompt: "The capital of", max_tokens: 5, temperature: 0, stream: true });
let ctext = "";
for await (const chunk of cs) ctext += chunk.choices[0]?.text ?? "";
check("completions stream equals non-streamed", ctext === c.choices[0].text, `${JSON.stringify(ctext)} vs ${JSON.stringify(c.choices[0].text)}`);

// models
const models = await client.models.list();
check("models.list", models.data.length === 1 && models.data[0].object === "model", JSON.stringify(models.data));

// an error surfaces as the SDK's error type, with the status and the server's message
try {
  await client.chat.completions.create({ model: "any", messages, temperature: 7 });
  check("bad request raises", false, "no exception");
} catch (e) {
  check("bad request raises BadRequestError", e instanceof OpenAI.BadRequestError && e.status === 400 &&
    /temperature/.test(e.message) && e.param === "temperature", `${e?.constructor?.name} ${e?.status} ${e?.message}`);
}
// structured output through the SDK: a forced call, and JSON by a schema
{
  const args = { type: "object", properties: { x: { type: "integer" } }, required: ["x"], additionalProperties: false };
  const r = await client.chat.completions.create({ model: "any", messages, tool_choice: "required", parallel_tool_calls: false,
    max_tokens: 60, temperature: 0, chat_template_kwargs: { enable_thinking: false },
    tools: [{ type: "function", function: { name: "f", parameters: args } }] });
  const calls = r.choices[0].message.tool_calls ?? [];
  check("tool_choice required: one call to f with integer x", calls.length === 1 && calls[0].function.name === "f" &&
    Number.isInteger(JSON.parse(calls[0].function.arguments).x) && r.choices[0].finish_reason === "tool_calls",
    JSON.stringify(r.choices[0]));
  const j = await client.chat.completions.create({ model: "any", messages, max_tokens: 60, temperature: 0,
    chat_template_kwargs: { enable_thinking: false },
    response_format: { type: "json_schema", json_schema: { name: "r", strict: true, schema: args } } });
  let v = null;
  try { v = JSON.parse(j.choices[0].message.content); } catch { }
  check("response_format json_schema: the content is the schema's JSON", v !== null && Number.isInteger(v.x) &&
    Object.keys(v).length === 1, JSON.stringify(j.choices[0]));
}
// OpenAI's suffix (insertion) through the SDK: the answer is /infill's for the same prefix and suffix
{
  const c = await client.completions.create({ model: "any", prompt: "def add(a, b):\n", suffix: "\n", max_tokens: 5, temperature: 0 });
  const inf = await (await fetch(`http://127.0.0.1:${port}/infill`, { method: "POST", body: JSON.stringify({
    input_prefix: "def add(a, b):\n", input_suffix: "\n", n_predict: 5, temperature: 0 }) })).json();
  check("completions.create with suffix answers as /infill", c.choices[0].text === inf.content && c.usage.completion_tokens === 5,
    JSON.stringify({ c: c.choices[0], inf }));
}
// logit_bias through the SDK ({token id: bias}): banning the greedy first token puts the runner-up first
{
  const q = { model: "any", messages, max_tokens: 2, temperature: 0, logprobs: true, top_logprobs: 2 };
  const plain = await client.chat.completions.create(q);
  const [first, second] = plain.choices[0].logprobs.content[0].top_logprobs.map((t) => t.token);
  const tok = await (await fetch(`http://127.0.0.1:${port}/tokenize`, { method: "POST", body: JSON.stringify({ content: first }) })).json();
  const banned = await client.chat.completions.create({ ...q, logit_bias: { [tok.tokens[0]]: -100 } });
  check("logit_bias: a ban of the first token puts the runner-up first", tok.tokens.length === 1 &&
    banned.choices[0].logprobs.content[0].token === second, JSON.stringify({ first, second, tok, got: banned.choices[0].logprobs }));
}
process.exit(failed ? 1 : 0);
