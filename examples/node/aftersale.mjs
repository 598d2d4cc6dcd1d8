// The after-sale scenario with the official `openai` package for Node and chatmem's memory.
//
// The only changes to an ordinary OpenAI client: its base URL points at `chatmem serve`, and
// one header, `X-Chatmem-Conversation`, names the conversation. Each call sends only the
// turn's new messages; chatmem adds the conversation's window, so turns 2 and 3 ("that order")
// reach the model with the order number from turn 1. Turn 2 streams.
//
// Run by hand (from the repository root; see "OpenAI clients through `chatmem serve`" in
// docs/integrations.md):
//
//   (cd examples/node && npm ci)
//   CHATMEM_UPSTREAM_API_KEY=sk-... cargo run -q -p chatmem-cli -- serve --store memory: \
//       --upstream-base-url https://api.openai.com/v1 &
//   CHATMEM_MODEL=gpt-4o-mini node examples/node/aftersale.mjs
//
// Settings (environment): CHATMEM_BASE_URL (default http://127.0.0.1:8080/v1), CHATMEM_MODEL
// (default gpt-4o-mini), CHATMEM_CONVERSATION (default app-user-42-aftersale-node),
// CHATMEM_TOKEN (the bearer token when the server runs with --auth; sent as the API key).

import OpenAI from "openai";

const env = process.env;
const INSTRUCTIONS = "你是邻里仓售后。未发货可退。若对话历史中出现订单号，回答里必须原样写出该订单号。";

const client = new OpenAI({
  baseURL: env.CHATMEM_BASE_URL ?? "http://127.0.0.1:8080/v1",
  // chatmem serve takes its own bearer token (with --auth), never the upstream's key.
  apiKey: env.CHATMEM_TOKEN ?? "no-token-needed-on-loopback",
  defaultHeaders: { "X-Chatmem-Conversation": env.CHATMEM_CONVERSATION ?? "app-user-42-aftersale-node" },
});
const model = env.CHATMEM_MODEL ?? "gpt-4o-mini";

// Turn 1: the instructions (as `developer`, the role newer OpenAI models take) and the order.
let text = "我的订单是 LC202610060018，还没发货。";
console.log(`user: ${text}`);
const first = await client.chat.completions.create({
  model,
  messages: [
    { role: "developer", content: INSTRUCTIONS },
    { role: "user", content: text },
  ],
  max_completion_tokens: 300,
  presence_penalty: 0.5,
  metadata: { app: "aftersale" },
});
console.log(`assistant: ${first.choices[0].message.content}`);

// Turn 2, streamed: only the new message; "that order" comes from chatmem's memory.
text = "那单能退吗？";
console.log(`user: ${text}`);
const stream = await client.chat.completions.create({
  model,
  messages: [{ role: "user", content: text }],
  stream: true,
  stream_options: { include_usage: true },
});
let answer = "";
for await (const chunk of stream) {
  answer += chunk.choices[0]?.delta?.content ?? "";
}
console.log(`assistant: ${answer}`);

// Turn 3: the instructions again (as an application resends them) and a question that needs turn 1.
text = "退款几天到账？再报一下订单号。";
console.log(`user: ${text}`);
const third = await client.chat.completions.create({
  model,
  messages: [
    { role: "developer", content: INSTRUCTIONS },
    { role: "user", content: text },
  ],
  temperature: 0.2,
});
console.log(`assistant: ${third.choices[0].message.content}`);
