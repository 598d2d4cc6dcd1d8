"""The seed-003 after-sale scenario with the official `openai` package and chatmem's memory.

The only changes to an ordinary OpenAI client: its base URL points at `chatmem serve`, and one
header, `X-Chatmem-Conversation`, names the conversation. Each call sends only the turn's new
messages; chatmem adds the conversation's window, so turn 2 ("that order") reaches the model
with the order number from turn 1. Turn 2 streams, to show that works the same way.

Run by hand (from the repository root; see "OpenAI clients through `chatmem serve`" in
docs/integrations.md):

    bash examples/python/setup.sh
    CHATMEM_UPSTREAM_API_KEY=sk-... cargo run -q -p chatmem-cli -- serve --store memory: \
        --upstream-base-url https://api.deepseek.com/v1 &
    CHATMEM_MODEL=deepseek-chat examples/python/.venv/bin/python examples/python/aftersale.py

Settings (environment): CHATMEM_BASE_URL (default http://127.0.0.1:8080/v1), CHATMEM_MODEL
(default deepseek-chat), CHATMEM_CONVERSATION (default app-user-42-aftersale), CHATMEM_TOKEN
(the bearer token when the server runs with --auth; sent as the API key).
"""

import os

from openai import OpenAI

SYSTEM = "你是邻里仓售后。未发货可退。若对话历史中出现订单号，回答里必须原样写出该订单号。"
TURNS = ["我的订单是 LC202610060018，还没发货。", "那单能退吗？"]


def main() -> None:
    client = OpenAI(
        base_url=os.environ.get("CHATMEM_BASE_URL", "http://127.0.0.1:8080/v1"),
        # chatmem serve takes its own bearer token (with --auth), never the upstream's key.
        api_key=os.environ.get("CHATMEM_TOKEN", "no-token-needed-on-loopback"),
        default_headers={
            "X-Chatmem-Conversation": os.environ.get("CHATMEM_CONVERSATION", "app-user-42-aftersale")
        },
    )
    model = os.environ.get("CHATMEM_MODEL", "deepseek-chat")

    first, second = TURNS
    print(f"user: {first}")
    answer = client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": first}],
    )
    print(f"assistant: {answer.choices[0].message.content}")

    # Only the new message: the order number comes from chatmem's memory.
    print(f"user: {second}")
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": second}],
        stream=True,
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    print(f"assistant: {text}")


if __name__ == "__main__":
    main()
