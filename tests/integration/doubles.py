"""Test doubles at the paid external API boundaries only: an OpenAI-compatible chat endpoint and a
Tavily-compatible web-search endpoint. The real `openai` client and the real HTTP client talk to them."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


class PaidApiDouble:
    def __init__(self, port: int) -> None:
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self.fail = False
        # Answer json_schema requests as llama-cpp-python's server does (HTTP 500, it takes text and json_object).
        self.refuse_json_schema = False
        # Schema names whose next answer is not valid for the schema (then valid again).
        self.invalid_once: set[str] = set()
        # Answers that cite a passage number it was not given.
        self.cite_out_of_range = False
        # Seconds each chat completion takes, and the most that were in flight at once.
        self.delay_s = 0.0
        self.in_flight = 0
        self.most_in_flight = 0
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)
        self.app.post("/search")(self._search)
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> PaidApiDouble:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def chats(self, name: str | None = None) -> list[dict[str, Any]]:
        chats = [r for r in self.requests if r["path"] == "chat"]
        return [r for r in chats if r["schema_name"] == name] if name else chats

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        fmt = body.get("response_format") or {}
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        # The schema's name: in the strict format, or in the prompt when the server is not given the schema's name.
        named = re.search(r"one JSON object \((\w+)\)", system)
        name = (fmt.get("json_schema") or {}).get("name") or (named.group(1) if named else None)
        self.requests.append({"path": "chat", "schema_name": name, "model": body["model"], "format": fmt.get("type"),
                              "temperature": body.get("temperature"), "auth": request.headers.get("authorization"),
                              "strict": (fmt.get("json_schema") or {}).get("strict"), "user": user, "system": system})
        if self.fail:
            return JSONResponse({"error": {"message": "overloaded", "type": "server_error"}}, status_code=503)
        if self.refuse_json_schema and fmt.get("type") == "json_schema":
            return JSONResponse({"error": {"message": "response_format.type: Input should be 'text' or 'json_object'",
                                           "type": "internal_server_error"}}, status_code=500)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        if name in self.invalid_once:
            self.invalid_once.discard(name)
            content = '{"relevant": "perhaps"}'
        elif name:
            content = json.dumps(self._structured(name, user))
            # Without a format to fill in, a model writes around its JSON.
            content = content if fmt else f"Here is the JSON you asked for:\n```json\n{content}\n```"
        else:
            content = self._text(system, user)
            if self.cite_out_of_range:
                content = content.replace("[1]", "[42]")
        return JSONResponse({
            "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": len(user.split()) + len(system.split()), "completion_tokens": len(content.split()),
                      "total_tokens": len(user.split()) + len(system.split()) + len(content.split())},
        })

    @staticmethod
    def _structured(name: str, user: str) -> dict[str, Any]:
        if name == "route":
            # "... the <thing> that <clause>?" is a bridge question: find the thing first, then ask about it.
            bridge = re.search(r"^(.*?)\bthe (\w+) that (.+?)\?$", user)
            if bridge:
                first = f"Which {bridge.group(2)} {bridge.group(3)}?"
                return {"query_type": "COMPLEX_REASONING", "reason": "the test double's rule", "decomposition": "bridge",
                        "sub_questions": [{"text": first, "depends_on": []},
                                          {"text": f"{bridge.group(1)}#0?", "depends_on": [0]}]}
            kind = "COMPLEX_REASONING" if re.search(r"\bcompare\b", user, re.I) else "SIMPLE_FACT"
            return {"query_type": kind, "reason": "the test double's rule", "decomposition": "single", "sub_questions": []}
        if name == "grade_relevance":
            question = user.split("\n\n")[0].lower()
            passage = user.split("\n\n", 1)[1].lower()
            words = [w for w in re.findall(r"[a-z]{5,}", question) if w != "question"]
            return {"relevant": any(w in passage for w in words), "reason": "shared words"}
        if name == "grade_answer":
            return {"supported": "moon" not in user.lower(), "useful": True, "reason": "checked"}
        if name == "decompose":
            question = user.rstrip("?")
            parts = [p.strip() for p in re.split(r"\band\b", question.replace("Compare", "")) if p.strip()]
            return {"kind": "comparison" if len(parts) > 1 else "single",
                    "sub_questions": [{"text": p, "depends_on": []} for p in parts]}
        if name == "rewrite":
            return {"query": user.split("\n")[0].removeprefix("Query: ") + " explained"}
        raise ValueError(f"unexpected schema {name}")

    @staticmethod
    def _text(system: str, user: str) -> str:
        if "Passages:" not in user:
            return "Hello from the model."
        first = re.search(r"<passage [^>]*>\n(.*?)\n</passage>", user.split("Passages:\n", 1)[1], re.S)
        sentence = (first.group(1) if first else "").split(". ")[0].rstrip(".")
        return f"{sentence}. [1]"

    async def _search(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append({"path": "search", "query": body.get("query"), "api_key": body.get("api_key"),
                              "auth": request.headers.get("authorization")})
        if self.fail:
            return JSONResponse({"detail": "unavailable"}, status_code=503)
        return JSONResponse({"query": body.get("query"), "results": [
            {"title": "Web result about " + body.get("query", ""), "url": "https://example.org/answer",
             "content": f"The web says: {body.get('query', '')} has a well-known answer.", "score": 0.9}]})
