"""Hypothesis strategies for LangChain messages of every kind: human, AI (tool calls valid and
invalid, usage, reasoning), system (and developer), tool (artifact, status), chat messages of
any role, their chunks; content as text or lists of every kind of block; JSON metadata."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    HumanMessage,
    HumanMessageChunk,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)

# Every character but surrogates (no UTF-8 has them): CJK, emoji, NUL and other controls too.
text = st.text(max_size=12)
some_text = st.text(min_size=1, max_size=12)
b64 = st.sampled_from(["", "AAAA", "iVBORw0KGgo=", "UklGRg=="])

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=3)


def _block(kind: str, **fields: Any) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"type": st.just(kind), **fields})


blocks: st.SearchStrategy[Any] = st.one_of(
    text,
    _block("text", text=text),
    _block("text", text=text, annotations=st.lists(json_objects, max_size=2), id=some_text),
    _block("image", url=st.sampled_from(["https://example.com/a.png", "data:,x"])),
    _block("image", base64=b64, mime_type=st.sampled_from(["image/png", "image/jpeg"])),
    _block("image", base64=b64, mime_type=st.just("image/png"), extras=json_objects),
    _block("image_url", image_url=st.just("https://example.com/b.png")),
    _block(
        "image_url",
        image_url=st.fixed_dictionaries(
            {"url": st.just("https://example.com/c.png")},
            optional={"detail": st.sampled_from(["low", "high", "auto"])},
        ),
    ),
    _block(
        "audio", base64=b64, mime_type=st.sampled_from(["audio/wav", "audio/mpeg", "audio/ogg"])
    ),
    _block(
        "input_audio", input_audio=st.fixed_dictionaries({"data": b64, "format": st.just("wav")})
    ),
    _block("file", base64=b64, mime_type=st.just("application/pdf"), filename=some_text),
    _block("file", base64=b64, mime_type=st.just("application/pdf")),
    _block("file", file_id=some_text),
    _block(
        "file",
        file=st.fixed_dictionaries({"file_data": st.just("data:,x")}, optional={"filename": text}),
    ),
    _block("reasoning", reasoning=text),
    _block("reasoning", summary=st.lists(_block("summary_text", text=text), max_size=2)),
    _block("thinking", thinking=text, signature=text),
    _block("refusal", refusal=text),
    _block("tool_call", name=some_text, args=json_objects, id=some_text),
    _block("tool_use", name=some_text, input=json_objects, id=some_text),
    _block("non_standard", value=json_objects),
    # a provider's own block
    st.dictionaries(text, json_values, max_size=3).map(lambda d: {**d, "type": "x-provider"}),
)
contents: st.SearchStrategy[Any] = text | st.lists(blocks, max_size=4)
ids = st.none() | some_text
names = st.none() | text
# Keys AIMessage reads into its tool calls are left out: those are the tool calls' own fields.
kwargs = json_objects.filter(lambda d: not {"tool_calls", "function_call"} & d.keys())

tool_calls = st.lists(
    st.fixed_dictionaries(
        {"name": text, "args": json_objects, "id": ids, "type": st.just("tool_call")}
    ),
    max_size=3,
)
invalid_tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.none() | text,
            "args": st.none() | text,
            "id": ids,
            "error": st.none() | text,
            "type": st.just("invalid_tool_call"),
        }
    ),
    max_size=2,
)
tool_call_chunks = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.none() | some_text,
            "args": st.none() | st.sampled_from(['{"a": 1}', '{"a"', "", "[1]"]),
            "id": ids,
            "index": st.none() | st.integers(0, 3),
            "type": st.just("tool_call_chunk"),
        }
    ),
    max_size=2,
)
counts = st.integers(min_value=0, max_value=10**9)
usage = st.none() | st.fixed_dictionaries(
    {"input_tokens": counts, "output_tokens": counts, "total_tokens": counts},
    optional={
        "input_token_details": st.fixed_dictionaries({}, optional={"cache_read": counts}),
        "output_token_details": st.fixed_dictionaries({}, optional={"reasoning": counts}),
    },
)
reasoning_kwargs = kwargs | kwargs.map(lambda d: {**d, "reasoning_content": "想一想"})
system_kwargs = kwargs | kwargs.map(lambda d: {**d, "__openai_role__": "developer"})
chat_roles = (
    st.sampled_from(["user", "assistant", "system", "developer", "tool", "function", "ai", "human"])
    | text
)


def _fields(**extra: Any) -> dict[str, Any]:
    return {
        "content": contents,
        "id": ids,
        "name": names,
        "additional_kwargs": kwargs,
        "response_metadata": json_objects,
        **extra,
    }


def _message(cls: type[BaseMessage], **extra: Any) -> st.SearchStrategy[BaseMessage]:
    return st.builds(lambda f: cls(**f), st.fixed_dictionaries(_fields(**extra)))


humans = _message(HumanMessage) | _message(HumanMessageChunk)
ais = _message(
    AIMessage,
    additional_kwargs=reasoning_kwargs,
    tool_calls=tool_calls,
    invalid_tool_calls=invalid_tool_calls,
    usage_metadata=usage,
) | _message(
    AIMessageChunk,
    additional_kwargs=reasoning_kwargs,
    tool_call_chunks=tool_call_chunks,
    usage_metadata=usage,
)
systems = _message(SystemMessage, additional_kwargs=system_kwargs) | _message(
    SystemMessageChunk, additional_kwargs=system_kwargs
)
tool_fields = {
    "tool_call_id": some_text,
    "status": st.sampled_from(["success", "error"]),
    "artifact": json_values,
}
tools = _message(ToolMessage, **tool_fields) | _message(ToolMessageChunk, **tool_fields)
chats = _message(ChatMessage, role=chat_roles) | _message(ChatMessageChunk, role=chat_roles)

messages: st.SearchStrategy[BaseMessage] = humans | ais | systems | tools | chats
"""Any message chatmem stores."""

non_system: st.SearchStrategy[BaseMessage] = (
    humans
    | ais
    | tools
    | _message(ChatMessage, role=chat_roles.filter(lambda r: r not in ("system", "developer")))
)
"""A message whose body is not the conversation's system message."""
