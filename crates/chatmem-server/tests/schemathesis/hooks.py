"""schemathesis hooks for run.sh (SCHEMATHESIS_HOOKS=hooks).

Two rules of a window policy that JSON Schema cannot say (the document says them in the fields'
descriptions; the server answers 400): `evict_to` must be below the budget it goes with (the
request's `max_messages` or `max_tokens`, else the server's), and a query's `max_messages` and
`max_tokens` (separate parameters) are not given together (a body's policy object declares that
one). So a generated policy whose `evict_to` is a count at or over its budget gets one below it
(none when the budget is 1), and a query with both budgets as counts within the server's caps
loses `max_tokens`. A policy that breaks the schema some other way is left as it is.

Clearing (`clear_tool_results`, in a query its flat `clear_tool_results.<field>` parameters) has
rules of the same kind: its `trigger_tokens` is not below `clear_at_least_tokens` nor above a
token budget, and a tool name is at most 256 bytes of UTF-8 (`maxLength` counts characters). So
a trigger over the budget is lowered to it, a block over the trigger lowered to it, and a long
name cut to 256 bytes. A query's `clear_tool_results.exclude_tools` list is cut to the names
that fit in 2 KiB of query, so that the URI stays within the server's limit (over it, 414).
A recall question (`GET …/recall?q=`) is cut to what fits in 2 KiB of query for the same reason
(its documented bound is the body limit, which the URI limit meets first).
"""

from typing import Any

import schemathesis

# run.sh starts the server with --max-messages 20: the budget of a policy that gives none.
SERVER_BUDGET = 20
# The trigger of clearing under a message budget when none is given (the core's default).
DEFAULT_TRIGGER = 100_000
MAX_TOOL_NAME_BYTES = 256
# How much of a query the excluded tool names may take (the server's URI limit is 8 KiB).
QUERY_NAMES_BYTES = 2048
# How much of a query a recall question may take, percent-encoded.
QUERY_QUESTION_BYTES = 2048
CLEAR = "clear_tool_results"
# Clearing's fields in a query: `clear_tool_results.keep=3`.
CLEAR_FIELDS = ("keep", "trigger_tokens", "clear_at_least_tokens", "exclude_tools", "clear_inputs")

# The server's caps (chatmem serve's defaults of --max-window-messages and --max-window-tokens).
CAPS = {"max_messages": 1000, "max_tokens": 200_000}


def _one_budget(query: Any) -> Any:
    if not isinstance(query, dict):
        return query
    counts = {k: _as_count(query.get(k)) for k in CAPS}
    if all(n is not None and n <= CAPS[k] for k, n in counts.items()):
        query = {k: v for k, v in query.items() if k != "max_tokens"}
    return query


def _fit(policy: Any) -> Any:
    if not isinstance(policy, dict):
        return policy
    evict_to = _as_count(policy.get("evict_to"))
    if evict_to is None:
        return policy
    budgets = [policy.get(k) for k in ("max_messages", "max_tokens") if policy.get(k) is not None]
    if len(budgets) > 1:
        return policy
    budget = _as_count(budgets[0]) if budgets else SERVER_BUDGET
    if budget is None or evict_to < budget:
        return policy
    fitted = dict(policy)
    if budget > 1:
        fitted["evict_to"] = budget - 1
    else:
        del fitted["evict_to"]
    return fitted


def _fit_clear(clear: Any, policy: dict) -> Any:
    """`clear`, a policy's clearing (with `policy`'s budget), fitted to the rules above."""
    if not isinstance(clear, dict):
        return clear
    fitted = dict(clear)
    max_tokens = _as_count(policy.get("max_tokens"))
    tokens_budget = max_tokens is not None and policy.get("max_messages") is None
    trigger = _as_whole(fitted.get("trigger_tokens"))
    if trigger is not None and tokens_budget and trigger > max_tokens:
        trigger = max_tokens
        fitted["trigger_tokens"] = trigger
    if trigger is None:
        trigger = max_tokens if tokens_budget else DEFAULT_TRIGGER
    block = _as_whole(fitted.get("clear_at_least_tokens"))
    if block is not None and block > trigger:
        fitted["clear_at_least_tokens"] = trigger
    names = fitted.get("exclude_tools")
    if isinstance(names, list):
        fitted["exclude_tools"] = [_cut(n) for n in names]
    elif isinstance(names, str):
        fitted["exclude_tools"] = _cut(names)
    return fitted


def _cut(name: Any) -> Any:
    """A tool name cut to its first 256 bytes of UTF-8 (on a character boundary)."""
    if not isinstance(name, str):
        return name
    data = name.encode("utf-8", "surrogatepass")
    if len(data) <= MAX_TOOL_NAME_BYTES:
        return name
    return data[:MAX_TOOL_NAME_BYTES].decode("utf-8", "ignore")


def _fit_query_clear(query: dict) -> dict:
    """A query's flat clearing parameters, fitted as a body's object is."""
    prefix = CLEAR + "."
    clear = {k[len(prefix):]: v for k, v in query.items() if k.startswith(prefix)}
    if not clear:
        return query
    fitted = _fit_clear(clear, query)
    names = fitted.get("exclude_tools")
    if isinstance(names, list):
        kept, size = [], 0
        for name in names:
            # Each as `&clear_tool_results.exclude_tools=` and its percent-encoded UTF-8.
            size += len(prefix) + 15 + 3 * len(str(name).encode("utf-8", "surrogatepass"))
            if size > QUERY_NAMES_BYTES:
                break
            kept.append(name)
        fitted["exclude_tools"] = kept
    rest = {k: v for k, v in query.items() if not k.startswith(prefix)}
    return {**rest, **{prefix + k: v for k, v in fitted.items()}}


def _fit_question(query: dict) -> dict:
    """A recall question cut to what fits in QUERY_QUESTION_BYTES once percent-encoded (at
    most 3 bytes per byte of UTF-8), on a character boundary, never to nothing."""
    question = query.get("q")
    if not isinstance(question, str):
        return query
    data = question.encode("utf-8", "surrogatepass")
    most = QUERY_QUESTION_BYTES // 3
    if len(data) <= most:
        return query
    cut = data[:most].decode("utf-8", "ignore") or question[:1]
    return {**query, "q": cut}


def _as_whole(value: Any) -> int | None:
    """A whole number of at least 0 (as `_as_count`), or None."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value >= 0 and float(value).is_integer():
            return int(value)
    return None


def _as_count(value: Any) -> int | None:
    """A whole number of at least 1 (JSON Schema's `integer`, 1.0 included; in a query, its
    decimal text), or None."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and value[0] != "0":
        return int(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value >= 1 and float(value).is_integer():
            return int(value)
    return None


# `map_case`: the one hook every phase's cases go through (coverage's too).
@schemathesis.hook
def map_case(ctx: Any, case: Any) -> Any:
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("policy"), dict):
        policy = _fit(body["policy"])
        if CLEAR in policy:
            policy = {**policy, CLEAR: _fit_clear(policy[CLEAR], policy)}
        case.body = {**body, "policy": policy}
    # In a query the policy is one exploded object parameter: its fields are the query's own.
    if isinstance(case.query, dict):
        if isinstance(case.query.get("policy"), dict):
            case.query = {**case.query, "policy": _fit(case.query["policy"])}
        else:
            case.query = _fit_question(_fit_query_clear(_fit(_one_budget(case.query))))
    return case
