"""Every ChatMessage LlamaIndex can build comes back equal (``==``) from chatmem: property
tests over every role and block kind with unicode text, binary data and nested
``additional_kwargs``, pure (to_chatmem, JSON, from_chatmem) and through ``chatmem serve``
(SQLite and PostgreSQL)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import (
    AudioBlock,
    CacheControl,
    CachePoint,
    ChatMessage,
    CitableBlock,
    CitationBlock,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from openai.types.chat import ChatCompletionMessageFunctionToolCall

from chatmem.llama_index import ChatmemChatStore, ChatmemMemory, from_chatmem, to_chatmem

from .conftest import Server

# a file that exists wherever the test reads it back (an ImageBlock's path must)
HERE = Path(__file__)

text = st.text(max_size=20)
short = st.text(max_size=6)
mimes = st.none() | st.sampled_from(["image/png", "audio/wav", "application/pdf"])
scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too
    | st.floats(allow_nan=False)  # infinities and -0.0 too; NaN never equals itself
    | text
    | st.binary(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(short, inner, max_size=3)
    ),
    max_leaves=8,
)
urls = st.builds(
    lambda host, path: f"https://{host}.example/{path}",
    st.sampled_from(["a", "cdn", "x-1"]),
    st.text("abcxyz019._-~", max_size=10),
)


def _image() -> st.SearchStrategy[ImageBlock]:
    detail = st.none() | st.sampled_from(["low", "high", "auto"])
    return st.one_of(
        st.builds(ImageBlock, url=urls, detail=detail),
        st.builds(ImageBlock, image=st.binary(min_size=1, max_size=40), detail=detail),
        st.builds(
            ImageBlock, image=st.binary(min_size=1, max_size=40), image_mimetype=mimes, url=urls
        ),
        st.builds(ImageBlock, path=st.just(HERE), image_mimetype=mimes),
    )


texts = st.builds(TextBlock, text=text)
thinking = st.builds(
    ThinkingBlock,
    content=st.none() | text,
    num_tokens=st.none() | st.integers(0, 10_000),
    additional_information=st.dictionaries(short, json_values, max_size=2),
)
tool_call_blocks = st.builds(
    ToolCallBlock,
    tool_call_id=st.none() | short,
    tool_name=short,
    tool_kwargs=st.dictionaries(short, json_values, max_size=3) | text,
)
documents = st.builds(
    DocumentBlock,
    data=st.binary(min_size=1, max_size=40),
    title=st.none() | text,
    document_mimetype=mimes,
)
audios = st.builds(
    AudioBlock,
    audio=st.binary(min_size=1, max_size=40),
    format=st.none() | st.sampled_from(["wav", "mp3"]),
)
blocks = st.one_of(
    texts,
    _image(),
    audios,
    st.builds(AudioBlock, url=urls),
    st.builds(
        VideoBlock,
        video=st.binary(min_size=1, max_size=40),
        video_mimetype=st.none() | st.just("video/mp4"),
        fps=st.none() | st.integers(1, 60),
    ),
    documents,
    st.builds(DocumentBlock, url=urls, title=text),
    st.builds(
        CachePoint,
        cache_control=st.builds(CacheControl, type=st.just("ephemeral"), ttl=short),
    ),
    st.builds(
        CitableBlock,
        title=text,
        source=text,
        content=st.lists(st.one_of(texts, _image(), documents), max_size=2),
    ),
    st.builds(
        CitationBlock,
        cited_content=texts,
        source=text,
        title=text,
        additional_location_info=st.dictionaries(short, st.integers(), max_size=2),
    ),
    thinking,
    tool_call_blocks,
)
# what each role mostly holds, beside any block at all
FAVOURITE = {
    MessageRole.USER: texts | _image() | audios | documents,
    MessageRole.ASSISTANT: texts | thinking | tool_call_blocks,
    MessageRole.CHATBOT: texts | thinking | tool_call_blocks,
    MessageRole.MODEL: texts | thinking | tool_call_blocks,
}
sdk_calls = st.builds(
    lambda i, name, args: ChatCompletionMessageFunctionToolCall.model_validate(
        {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
    ),
    short,
    short,
    text,
)
openai_calls = st.fixed_dictionaries(
    {
        "id": short,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": short, "arguments": text}),
    }
)


@st.composite
def messages(draw: st.DrawFn, roles: st.SearchStrategy[MessageRole] | None = None) -> ChatMessage:
    role = draw(st.sampled_from(list(MessageRole)) if roles is None else roles)
    # "images" is LlamaIndex's legacy key: it turns ImageDocuments into blocks
    kwargs: dict[str, Any] = draw(
        st.dictionaries(short.filter(lambda k: k != "images"), json_values, max_size=3)
    )
    if role in (MessageRole.TOOL, MessageRole.FUNCTION):
        kwargs["tool_call_id"] = draw(st.text(min_size=1, max_size=8))
        if draw(st.booleans()):
            kwargs["is_error"] = draw(st.booleans())
    if draw(st.booleans()):
        kwargs["name"] = draw(short)
    if draw(st.booleans()):
        kwargs["tool_calls"] = draw(st.lists(sdk_calls | openai_calls, max_size=2))
    favourite = FAVOURITE.get(role, texts)
    # one_of would flatten the two into one uniform choice; this keeps them three to one
    block = st.integers(0, 3).flatmap(lambda i: favourite if i else blocks)
    return ChatMessage(
        role=role, blocks=draw(st.lists(block, max_size=5)), additional_kwargs=kwargs
    )


def _wire(message: ChatMessage) -> Any:
    """``message`` as it travels: strict JSON (no NaN, no infinities) and back."""
    return json.loads(json.dumps(to_chatmem(message), allow_nan=False))


@settings(max_examples=600, deadline=None)
@given(messages())
def test_every_message_round_trips(message: ChatMessage) -> None:
    assert from_chatmem(_wire(message)) == message


@settings(max_examples=300, deadline=None)
@given(messages())
def test_the_body_is_what_a_model_may_see(message: ChatMessage) -> None:
    body: dict[str, Any] = {k: v for k, v in to_chatmem(message).items() if k != "metadata"}
    assert body["role"] in ("system", "developer", "user", "assistant", "tool")
    thoughts = "".join(
        b.content for b in message.blocks if isinstance(b, ThinkingBlock) and b.content
    )
    content = body.get("content")
    texts = [b.text for b in message.blocks if isinstance(b, TextBlock)]
    if isinstance(content, str):
        assert [content] == texts or (content == "" and texts == [])
    else:
        got = [p["text"] for p in content or [] if p["type"] == "text"]
        assert got == texts  # each text block its own part, never joined
        if body["role"] != "user":
            assert all(p["type"] == "text" for p in content or [])
    if thoughts and body["role"] == "assistant":
        assert body["reasoning_content"] == thoughts
    assert "reasoning_content" not in body or body["role"] == "assistant"


def test_a_body_changed_by_another_writer_wins() -> None:
    message = ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[ThinkingBlock(content="先查"), TextBlock(text="订单未发货")],
    )
    stored = _wire(message)
    assert from_chatmem(stored) == message
    stored["content"] = "订单已发货"
    assert from_chatmem(stored) == ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[ThinkingBlock(content="先查"), TextBlock(text="订单已发货")],
    )


# through the server: one conversation per example; a system (or developer) message is the
# conversation's own, read first, so a sequence has at most one and it leads
later = st.sampled_from(
    [r for r in MessageRole if r not in (MessageRole.SYSTEM, MessageRole.DEVELOPER)]
)
sequences = st.tuples(
    st.lists(messages(st.sampled_from([MessageRole.SYSTEM, MessageRole.DEVELOPER])), max_size=1),
    st.lists(messages(later), min_size=1, max_size=3),
).map(lambda t: t[0] + t[1])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=sequences)
def test_every_message_round_trips_through_the_server(
    server: Server, sequence: list[ChatMessage]
) -> None:
    conversation = f"rt-{uuid.uuid4().hex}"
    with server.client() as client:
        ChatmemChatStore(client).set_messages(conversation, sequence)
        memory = ChatmemMemory(conversation, client)
        assert memory.get_all() == sequence
        memory.reset()
