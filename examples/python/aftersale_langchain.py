"""The after-sale scenario with LangChain's `ChatOpenAI`: a tool round trip, then a structured
output, then a plain question, each needing the turns before.

LangChain keeps the conversation itself and sends the whole of it on every call, as most
frameworks and chat UIs do. chatmem serve recognizes the messages it already holds, stores only
the new ones, and sends the model its window of the conversation (so a long conversation stays
within the window while the application keeps its own list unchanged).

Run by hand (from the repository root; see "OpenAI clients through `chatmem serve`" in
docs/integrations.md):

    bash examples/python/setup.sh
    CHATMEM_UPSTREAM_API_KEY=sk-... cargo run -q -p chatmem-cli -- serve --store memory: \
        --upstream-base-url https://api.openai.com/v1 &
    CHATMEM_MODEL=gpt-4o-mini examples/python/.venv/bin/python examples/python/aftersale_langchain.py

Settings (environment): CHATMEM_BASE_URL (default http://127.0.0.1:8080/v1), CHATMEM_MODEL
(default gpt-4o-mini), CHATMEM_CONVERSATION (default app-user-42-aftersale-langchain),
CHATMEM_TOKEN (the bearer token when the server runs with --auth; sent as the API key).
"""

import json
import os
from typing import Optional

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

SYSTEM = "你是邻里仓售后。未发货可退。查询订单状态用 order_status 工具。若对话历史中出现订单号，回答里必须原样写出该订单号。"


@tool
def order_status(order_id: str) -> str:
    """The shipping status of an order, by its number (e.g. LC202610060018)."""
    # A stand-in for the shop's order system.
    return json.dumps({"order_id": order_id, "status": "not_shipped"})


class RefundAnswer(BaseModel):
    """Whether the order under discussion can be refunded."""

    order_id: Optional[str] = Field(description="the order the conversation is about, if known")
    refundable: bool = Field(description="whether that order can be refunded now")
    reply: str = Field(description="the answer to show the customer")


def main() -> None:
    llm = ChatOpenAI(
        base_url=os.environ.get("CHATMEM_BASE_URL", "http://127.0.0.1:8080/v1"),
        # chatmem serve takes its own bearer token (with --auth), never the upstream's key.
        api_key=os.environ.get("CHATMEM_TOKEN", "no-token-needed-on-loopback"),
        model=os.environ.get("CHATMEM_MODEL", "gpt-4o-mini"),
        temperature=0,
        max_completion_tokens=300,
        default_headers={
            "X-Chatmem-Conversation": os.environ.get(
                "CHATMEM_CONVERSATION", "app-user-42-aftersale-langchain"
            )
        },
    )
    with_tools = llm.bind_tools([order_status], tool_choice="auto", strict=True, parallel_tool_calls=False)
    structured = llm.with_structured_output(RefundAnswer, include_raw=True)

    # Turn 1: the model looks the order up with the tool, then answers.
    history = [SystemMessage(SYSTEM), HumanMessage("我的订单是 LC202610060018，还没发货，帮我查一下。")]
    print(f"user: {history[-1].content}")
    ai = with_tools.invoke(history)
    history.append(ai)
    if not ai.tool_calls:
        raise SystemExit(f"expected a tool call, got: {ai.content!r}")
    for call in ai.tool_calls:
        print(f"tool call: {call['name']}({json.dumps(call['args'], ensure_ascii=False)})")
        history.append(order_status.invoke(call))  # a ToolMessage answering the call's id
    ai = with_tools.invoke(history)
    history.append(ai)
    print(f"assistant: {ai.content}")

    # Turn 2: a structured answer about "that order", known only from turn 1.
    history.append(HumanMessage("那单能退吗？"))
    print(f"user: {history[-1].content}")
    out = structured.invoke(history)
    if out["parsed"] is None:
        raise SystemExit(f"no structured answer: {out['parsing_error']}")
    history.append(out["raw"])  # the answer as the model sent it, so the conversation goes on
    print(f"assistant: {out['parsed'].model_dump_json()}")

    # Turn 3: plain text, still about that order.
    history.append(HumanMessage("好的，请帮我退款，并再报一下订单号。"))
    print(f"user: {history[-1].content}")
    ai = llm.invoke(history)
    print(f"assistant: {ai.content}")


if __name__ == "__main__":
    main()
