/**
 * Test support: a loopback OpenAI-compatible upstream for `chatmem serve --upstream-base-url`.
 * It answers `POST /v1/chat/completions` (JSON, or server-sent events with `stream: true`)
 * with "echo: " and the last message's text, `GET /v1/models` with one model, and records the
 * requests it received.
 */

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** A running upstream. */
export interface Upstream {
  /** `http://127.0.0.1:PORT/v1`, for `--upstream-base-url`. */
  baseUrl: string;
  /** The chat-completion request bodies received, in order. */
  requests: Array<{ model: string; messages: Array<{ role: string; content: unknown }>; stream?: boolean }>;
  stop(): Promise<void>;
}

/** Starts an upstream on a free loopback port. */
export async function startUpstream(): Promise<Upstream> {
  const requests: Upstream["requests"] = [];
  const server = createServer((req, res) => {
    handle(req, res, requests).catch((e: unknown) => {
      res.writeHead(500).end(String(e));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function handle(req: IncomingMessage, res: ServerResponse, requests: Upstream["requests"]): Promise<void> {
  if (req.method === "GET" && req.url === "/v1/models") {
    json(res, { object: "list", data: [{ id: "fake-model", object: "model", created: 1_700_000_000, owned_by: "tests" }] });
    return;
  }
  if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
    res.writeHead(404).end();
    return;
  }
  let body = "";
  for await (const chunk of req) body += chunk;
  const request = JSON.parse(body) as Upstream["requests"][number];
  requests.push(request);
  const last = request.messages.at(-1)?.content;
  const answer = `echo: ${typeof last === "string" ? last : JSON.stringify(last)}`;
  const base = { id: `chatcmpl-${requests.length}`, created: 1_700_000_000, model: request.model };
  if (!request.stream) {
    json(res, {
      ...base,
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: answer }, finish_reason: "stop" }],
      usage: { prompt_tokens: 10, completion_tokens: 2, total_tokens: 12 },
    });
    return;
  }
  res.writeHead(200, { "content-type": "text/event-stream" });
  const half = Math.ceil(answer.length / 2);
  const deltas = [{ role: "assistant", content: "" }, { content: answer.slice(0, half) }, { content: answer.slice(half) }];
  for (const [i, delta] of deltas.entries()) {
    const finish = i === deltas.length - 1 ? "stop" : null;
    res.write(`data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
  }
  res.end("data: [DONE]\n\n");
}

function json(res: ServerResponse, value: unknown): void {
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(value));
}
