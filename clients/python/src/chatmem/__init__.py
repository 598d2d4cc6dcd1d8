"""chatmem: a typed client for ``chatmem serve``, with LangChain and LlamaIndex adapters.

``Client`` and ``AsyncClient`` call every REST route; ``chatmem.langchain`` (extra
``langchain``) and ``chatmem.llama_index`` (extra ``llama-index``) keep a framework's messages
in chatmem.
"""

from .client import (
    DEFAULT_TIMEOUT,
    DEFAULT_URL,
    AsyncClient,
    Cleared,
    ClearToolResults,
    Client,
    ConversationPage,
    HistoryPage,
    Message,
    Policy,
    Prompt,
    Recall,
    Recalled,
    RecallHit,
    RecallOutcome,
    ToolCall,
    Window,
    __version__,
)
from .errors import (
    APIError,
    AuthenticationError,
    BadRequestError,
    ChatmemError,
    ConflictError,
    ConversionError,
    NotFoundError,
    PermissionDeniedError,
    RequestTooLargeError,
    ServerError,
    TransportError,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_URL",
    "APIError",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "ChatmemError",
    "ClearToolResults",
    "Cleared",
    "Client",
    "ConflictError",
    "ConversationPage",
    "ConversionError",
    "HistoryPage",
    "Message",
    "NotFoundError",
    "PermissionDeniedError",
    "Policy",
    "Prompt",
    "Recall",
    "RecallHit",
    "RecallOutcome",
    "Recalled",
    "RequestTooLargeError",
    "ServerError",
    "ToolCall",
    "TransportError",
    "Window",
    "__version__",
]
