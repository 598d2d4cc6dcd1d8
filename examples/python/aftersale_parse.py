"""The after-sale scenario with the official `openai` package's structured outputs.

`client.chat.completions.parse(...)` with a Pydantic model as `response_format`: the SDK sends
the model's JSON schema (`response_format` of type `json_schema`, strict) and parses the answer
into the model. Each call sends only the turn's new messages (the instructions and the user's
text) and names the conversation per call with `extra_headers`; chatmem serve adds the
conversation's window, so turns 2 and 3 ("that order") reach the model with the order number
from turn 1.

Run by hand (from the repository root; see "OpenAI clients through `chatmem serve`" in
docs/integrations.md):

    bash examples/python/setup.sh
    CHATMEM_UPSTREAM_API_KEY=sk-... cargo run -q -p chatmem-cli -- serve --store memory: \
        --upstream-base-url https://api.openai.com/v1 &
    CHATMEM_MODEL=gpt-4o-mini examples/python/.venv/bin/python examples/python/aftersale_parse.py

Settings (environment): CHATMEM_BASE_URL (default http://127.0.0.1:8080/v1), CHATMEM_MODEL
(default gpt-4o-mini), CHATMEM_CONVERSATION (default app-user-42-aftersale-parse),
CHATMEM_TOKEN (the bearer token when the server runs with --auth; sent as the API key).
"""

import os
from typing import Optional

from openai import OpenAI
from pydantic import BaseModel, Field

SYSTEM = "你是邻里仓售后。未发货可退。若对话历史中出现订单号，order_id 必须原样写出该订单号。"
TURNS = [
    "我的订单是 LC202610060018，还没发货。",
    "那单能退吗？",
    "退款几天到账？再报一下订单号。",
]


class AfterSaleAnswer(BaseModel):
    """What the after-sale assistant answers, as data the application can act on."""

    order_id: Optional[str] = Field(description="the order the conversation is about, if known")
    refundable: bool = Field(description="whether that order can be refunded now")
    reply: str = Field(description="the answer to show the customer")


def main() -> None:
    client = OpenAI(
        base_url=os.environ.get("CHATMEM_BASE_URL", "http://127.0.0.1:8080/v1"),
        # chatmem serve takes its own bearer token (with --auth), never the upstream's key.
        api_key=os.environ.get("CHATMEM_TOKEN", "no-token-needed-on-loopback"),
    )
    model = os.environ.get("CHATMEM_MODEL", "gpt-4o-mini")
    conversation = os.environ.get("CHATMEM_CONVERSATION", "app-user-42-aftersale-parse")

    for text in TURNS:
        print(f"user: {text}")
        # Only the new messages: what came before is chatmem's memory.
        completion = client.chat.completions.parse(
            model=model,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}],
            response_format=AfterSaleAnswer,
            max_completion_tokens=300,
            seed=7,
            extra_headers={"X-Chatmem-Conversation": conversation},
        )
        answer = completion.choices[0].message.parsed
        if answer is None:  # the model refused: the SDK's `refusal` says why
            raise SystemExit(f"no structured answer: {completion.choices[0].message.refusal}")
        print(f"assistant: {answer.model_dump_json()}")


if __name__ == "__main__":
    main()
