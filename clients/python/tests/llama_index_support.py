"""The LlamaIndex agent tests' script for the scripted loopback model (``upstream_agent``):
its answers depend only on the messages it receives, so a test shows what the model was given.

Its script, an after-sale desk:

- the last message a tool result: it answers with that result;
- the last user message asks about shipping and names an order: it calls ``order_status``;
- the last user message asks for a refund: it calls ``refund`` with the order number found in
  the messages it received (without tools, it says that order can be refunded), and asks
  which order when there is none;
- anything else: it echoes the user's text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llama_index.llms.openai import OpenAI

from . import upstream_agent
from .upstream_agent import ScriptedModel, calls, says, text_of

ORDER = re.compile(r"LC\d{12}")


Model = ScriptedModel
"""A running scripted model: its ``/v1`` base URL and every request body it received."""


def answer(messages: list[dict[str, Any]], tools: bool) -> dict[str, Any]:
    """The assistant message the script answers ``messages`` with (``tools``: it was
    offered tools)."""
    last = messages[-1]
    if last["role"] == "tool":
        return says(f"查询结果：{text_of(last)}")
    user = next(text_of(m) for m in reversed(messages) if m["role"] == "user")
    if "退款" in user:
        seen = ORDER.search(json.dumps(messages, ensure_ascii=False))
        if seen is None:
            return says("请问是哪个订单？")
        if not tools:
            return says(f"订单 {seen.group()} 可以退款。")
        return calls(("refund", {"order_id": seen.group()}))
    named = ORDER.search(user)
    if "发货" in user and named is not None and tools:
        return calls(("order_status", {"order_id": named.group()}))
    return says(f"收到：{user}")


@contextmanager
def scripted_model() -> Iterator[Model]:
    """Serves the script on a free loopback port for the ``with`` block."""
    with upstream_agent.scripted_model(lambda r: answer(r["messages"], bool(r.get("tools")))) as m:
        yield m


def llm(model: Model) -> OpenAI:
    """LlamaIndex's OpenAI LLM at `model`, never retrying."""
    return OpenAI(api_base=model.base_url, api_key="x", model="gpt-4o-mini", max_retries=0)
