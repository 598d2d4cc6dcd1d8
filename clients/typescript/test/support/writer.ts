/**
 * A writer process for the concurrency test: waits until `CHATMEM_START_AT` (epoch ms), then
 * adds `CHATMEM_TURNS` turns (a question and its answer, one atomic `addMessages` each) to
 * conversation `CHATMEM_CONVERSATION`, tagged `CHATMEM_WRITER-<turn>`, through the LangChain
 * history. The server's URL comes from `CHATMEM_URL`.
 */

import { AIMessage, HumanMessage } from "@langchain/core/messages";

import { ChatmemChatMessageHistory } from "chatmem/langchain";

const writer = process.env.CHATMEM_WRITER!;
const turns = Number(process.env.CHATMEM_TURNS);
const history = new ChatmemChatMessageHistory({ conversationId: process.env.CHATMEM_CONVERSATION! });

await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(process.env.CHATMEM_START_AT) - Date.now())));
for (let turn = 0; turn < turns; turn++) {
  await history.addMessages([new HumanMessage(`${writer}-${turn} question`), new AIMessage(`${writer}-${turn} answer`)]);
}
