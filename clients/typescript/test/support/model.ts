/**
 * Test support: a scripted model on loopback speaking OpenAI's chat-completions protocol
 * (`POST /v1/chat/completions`, JSON or server-sent events with `stream: true`). `script` reads
 * each request's messages and answers text or tool calls; every request is recorded.
 */

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** A message of a request, as the client sent it. */
export interface SentMessage {
  role: string;
  content?: unknown;
  tool_calls?: { id: string; type: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
  name?: string;
}

/** What the model answers: text, or tool calls (`arguments` as an object). */
export type Answer = { content: string } | { tool_calls: { name: string; arguments: Record<string, unknown> }[] };

/** A running scripted model. */
export interface ScriptedModel {
  /** `http://127.0.0.1:PORT/v1`, for a client's base URL. */
  baseUrl: string;
  /** The messages of every request, in order. */
  prompts: SentMessage[][];
  stop(): Promise<void>;
}

/** The text of a sent message's content (a string, or its text parts). */
export function textOf(m: SentMessage): string {
  if (typeof m.content === "string") return m.content;
  if (!Array.isArray(m.content)) return "";
  return m.content.map((p: { type?: string; text?: string }) => (p.type === "text" ? (p.text ?? "") : "")).join("");
}

/** Starts a model answering each request with `script(messages)`. */
export async function startModel(script: (messages: SentMessage[]) => Answer): Promise<ScriptedModel> {
  const prompts: SentMessage[][] = [];
  let calls = 0;
  const server = createServer((req, res) => {
    handle(req, res).catch((e: unknown) => {
      res.writeHead(500, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: String(e), type: "server_error" } }));
    });
  });
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
      res.writeHead(404).end();
      return;
    }
    let body = "";
    for await (const chunk of req) body += chunk;
    const request = JSON.parse(body) as { model: string; messages: SentMessage[]; stream?: boolean };
    prompts.push(request.messages);
    const answer = script(request.messages);
    const n = ++calls;
    const message =
      "content" in answer
        ? { role: "assistant", content: answer.content }
        : {
            role: "assistant",
            content: null,
            tool_calls: answer.tool_calls.map((c, i) => ({ id: `call_${n}_${i}`, type: "function", function: { name: c.name, arguments: JSON.stringify(c.arguments) } })),
          };
    const finish = "content" in answer ? "stop" : "tool_calls";
    const base = { id: `chatcmpl-${n}`, created: 1_700_000_000, model: request.model };
    const usage = { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 };
    if (!request.stream) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ...base, object: "chat.completion", choices: [{ index: 0, message, finish_reason: finish }], usage }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    const delta = "content" in answer ? message : { ...message, tool_calls: message.tool_calls?.map((c, index) => ({ index, ...c })) };
    res.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`);
    res.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: finish }] })}\n\n`);
    res.end("data: [DONE]\n\n");
  }
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    prompts,
    stop: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
