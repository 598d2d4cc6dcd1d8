"""A user's facts in the adapters' windows (private to the package).

The server sends a user's facts only in a turn begun for them: ``POST …/prompt`` (or
``…/messages``, whose answer is the window, without them) with ``"user"``. ``GET …/messages``
names no user. An adapter with a user reads the window it hands its framework (with each
message's metadata, which rebuilds the framework's message exactly) and the prompt of an empty
turn for the user, and puts the prompt's facts message into the window where the prompt has it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from .client import Message, Window

T = TypeVar("T")

FACTS_HEADING = "What is known about the user (kept across conversations):"
"""The first line of the message a user's facts are sent in (``chatmem::facts::FACTS_HEADING``)."""

_SYSTEM = ("system", "developer")


def _head(messages: Sequence[Message]) -> int:
    """How many messages come before the window: the system message, when there is one."""
    return 1 if messages and messages[0].get("role") in _SYSTEM else 0


def _is_facts(message: Message) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, str)
        and content.startswith(FACTS_HEADING + "\n")
    )


def _as_sent(message: Message) -> dict[str, object]:
    """``message`` as a prompt sends it: without what is stored and never sent."""
    return {
        k: v for k, v in message.items() if k not in ("metadata", "reasoning_content", "is_error")
    }


def with_facts(
    window: Sequence[Message], prompt: Sequence[Message]
) -> tuple[list[Message], Message | None]:
    """The window as ``prompt`` (an empty turn's, for the user) sends it, and its facts message
    (``None``: the user has no facts to send, and the window is returned whole).

    The facts message is the one right after the prompt's system message under
    :data:`FACTS_HEADING`. Under a token window the server leaves room for it by sending fewer
    of the oldest messages: the window keeps as many of its newest as the prompt sends, so the
    facts never make it pass the budget. A stored message that reads like the facts (a copy
    someone wrote into the conversation) is taken for what it is, a message of the
    conversation, whenever the prompt can be read that way. A prompt holding more messages
    than the window (another writer committed between the two reads) keeps the window whole.
    """
    head, whead = _head(prompt), _head(window)
    body = list(window[whead:])
    if len(prompt) <= head or not _is_facts(prompt[head]):
        return list(window), None
    sent = len(prompt) - head - 1
    if sent == len(body) - 1 and _as_sent(body[0]) == prompt[head]:
        return list(window), None
    return list(window[:whead]) + body[max(len(body) - sent, 0) :], prompt[head]


def facts_at(window: Sequence[Message]) -> int:
    """Where the facts message goes in ``window``: right after its system message."""
    return _head(window)


def window_with_facts(
    window: Window | None,
    prompt: Sequence[Message] | None,
    convert: Callable[[Message], T],
    facts_message: Callable[[Message], T],
) -> list[T]:
    """``window`` as a framework's messages (``convert``), with the facts message of ``prompt``
    (an empty turn's prompt for the adapter's user; ``None``: no user) made by
    ``facts_message`` and put where the server sends it."""
    stored = window.messages if window is not None else []
    if prompt is None:
        return [convert(m) for m in stored]
    kept, facts = with_facts(stored, prompt)
    messages = [convert(m) for m in kept]
    if facts is not None:
        messages.insert(facts_at(kept), facts_message(facts))
    return messages
