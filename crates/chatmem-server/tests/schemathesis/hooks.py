"""schemathesis hooks for run.sh (SCHEMATHESIS_HOOKS=hooks).

Two rules of a window policy that JSON Schema cannot say (the document says them in the fields'
descriptions; the server answers 400): `evict_to` must be below the budget it goes with (the
request's `max_messages` or `max_tokens`, else the server's), and a query's `max_messages` and
`max_tokens` (separate parameters) are not given together (a body's policy object declares that
one). So a generated policy whose `evict_to` is a count at or over its budget gets one below it
(none when the budget is 1), and a query with both budgets as counts within the server's caps
loses `max_tokens`. A policy that breaks the schema some other way is left as it is.
"""

from typing import Any

import schemathesis

# run.sh starts the server with --max-messages 20: the budget of a policy that gives none.
SERVER_BUDGET = 20
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
        case.body = {**body, "policy": _fit(body["policy"])}
    # In a query the policy is one exploded object parameter: its fields are the query's own.
    if isinstance(case.query, dict):
        if isinstance(case.query.get("policy"), dict):
            case.query = {**case.query, "policy": _fit(case.query["policy"])}
        else:
            case.query = _fit(_one_budget(case.query))
    return case
