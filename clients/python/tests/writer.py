"""One writer process of the two-writers test: appends TURNS turns (a user message and its
answer, one commit each) to one conversation.

    python writer.py URL TOKEN CONVERSATION NAME TURNS
"""

from __future__ import annotations

import sys

from chatmem import Client


def main() -> None:
    url, token, conversation, name, turns = sys.argv[1:]
    with Client(url, token=token) as client:
        for i in range(int(turns)):
            text = f"{name}-{i}"
            client.add_messages(
                conversation,
                [{"role": "user", "content": text}, {"role": "assistant", "content": f"{text} ok"}],
            )


if __name__ == "__main__":
    main()
