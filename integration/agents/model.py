#!/usr/bin/env python3
"""A scripted model endpoint on 127.0.0.1 that records every request.

It speaks the three wire formats the real harnesses use:

  POST /v1/messages          Anthropic Messages API, streamed as SSE (Claude Code)
  POST /v1/responses         OpenAI Responses API, streamed as SSE (Codex CLI)
  POST /v1/chat/completions  OpenAI Chat Completions, plain or streamed (aider)

  python3 model.py SCENARIO.json RECORD.jsonl      prints "PORT <n>" once listening

SCENARIO is {"turns": [TURN, ...]}. Each request of the agent loop (a request that offers tools,
or any chat completion) takes the next turn; once they are spent the answer is the text "done".
A TURN is {"text": "..."} or {"calls": [CALL, ...]}; a CALL is {"tool": NAME, "input": {...}} or,
harness-neutral, {"shell": "COMMAND"}, sent as whichever shell tool the request offers
(Claude Code's Bash, Codex's exec_command or shell). Other requests (titles, summaries, quota
probes) get a short text and take no turn.

Every request is appended to RECORD as one JSON line: {"path", "agent": bool, "turn": n, "at": its
arrival (seconds since the epoch), "body"}.
The assertions read what the harness sent after each call: what its model would have read.
Only the standard library; one thread per connection; stops on SIGTERM.
"""
import http.server
import json
import sys
import threading
import time

scenario = json.load(open(sys.argv[1]))
record = open(sys.argv[2], "a", buffering=1)
lock = threading.Lock()
state = {"turn": 0, "call": 0}


def offered_tools(body):
    names = []
    for tool in body.get("tools") or []:
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if name:
            names.append(name)
    return names


def next_turn(body, path):
    """The turn this request gets (None: a side request), recording it."""
    agent = bool(body.get("tools")) or path.endswith("/chat/completions")
    with lock:
        turn = None
        if agent:
            turns = scenario["turns"]
            turn = turns[state["turn"]] if state["turn"] < len(turns) else {"text": "done"}
            state["turn"] += 1
        record.write(json.dumps({"path": path, "agent": agent, "turn": state["turn"] - 1 if agent else None,
                                 "at": time.time(), "body": body}) + "\n")
    return turn


def call_id():
    with lock:
        state["call"] += 1
        return state["call"]


def resolve(call, tools):
    """A CALL as (tool name, input) for a harness offering `tools`."""
    if "shell" not in call:
        return call["tool"], call["input"]
    command = call["shell"]
    if "Bash" in tools:
        return "Bash", {"command": command, "description": "run a command"}
    if "exec_command" in tools:
        return "exec_command", {"cmd": command}
    if "shell" in tools:
        return "shell", {"command": ["bash", "-lc", command]}
    raise ValueError(f"no shell tool among {tools}")


def sse(handler, events):
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.end_headers()
    for name, data in events:
        chunk = (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
        handler.wfile.write(chunk.encode())
    handler.wfile.flush()
    handler.close_connection = True


def send_json(handler, value, status=200):
    data = json.dumps(value).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def anthropic(handler, body, turn):
    tools = offered_tools(body)
    blocks = []
    if turn is None:
        blocks.append({"type": "text", "text": "ok"})
    elif "calls" in turn:
        for call in turn["calls"]:
            name, args = resolve(call, tools)
            blocks.append({"type": "tool_use", "id": f"toolu_{call_id():04d}", "name": name, "input": args})
    else:
        blocks.append({"type": "text", "text": turn["text"]})
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    message = {"id": f"msg_{call_id():04d}", "type": "message", "role": "assistant",
               "model": body.get("model", "scripted"), "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    if not body.get("stream"):
        message.update(content=blocks, stop_reason=stop)
        return send_json(handler, message)
    events = [("message_start", {"type": "message_start", "message": message})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            start = dict(block, input={})
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta",
                                                             "partial_json": json.dumps(block["input"])}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 1}}))
    events.append(("message_stop", {"type": "message_stop"}))
    sse(handler, events)


def responses(handler, body, turn):
    tools = offered_tools(body)
    rid = f"resp_{call_id():04d}"
    items = []
    if turn is not None and "calls" in turn:
        for call in turn["calls"]:
            name, args = resolve(call, tools)
            items.append({"type": "function_call", "id": f"fc_{call_id():04d}", "call_id": f"call_{call_id():04d}",
                          "name": name, "arguments": json.dumps(args), "status": "completed"})
    else:
        text = "ok" if turn is None else turn["text"]
        items.append({"type": "message", "id": f"msg_{call_id():04d}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": text, "annotations": []}]})
    usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}
    events = [("response.created", {"type": "response.created", "response": {"id": rid, "status": "in_progress"}})]
    for i, item in enumerate(items):
        events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": i, "item": item}))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": i, "item": item}))
    events.append(("response.completed", {"type": "response.completed",
                                           "response": {"id": rid, "status": "completed", "output": items, "usage": usage}}))
    sse(handler, events)


def chat(handler, body, turn):
    text = "done" if turn is None or "text" not in turn else turn["text"]
    if not body.get("stream"):
        return send_json(handler, {"id": f"chatcmpl-{call_id()}", "object": "chat.completion", "created": 0,
                                   "model": body.get("model", "scripted"),
                                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                "finish_reason": "stop"}],
                                   "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
    cid = f"chatcmpl-{call_id()}"
    base = {"id": cid, "object": "chat.completion.chunk", "created": 0, "model": body.get("model", "scripted")}
    events = [(None, dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": text},
                                          "finish_reason": None}])),
              (None, dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]))]
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()
    for _, data in events:
        handler.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
    handler.wfile.write(b"data: [DONE]\n\n")
    handler.close_connection = True


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        record.write(json.dumps({"path": self.path, "agent": False, "turn": None, "body": None}) + "\n")
        send_json(self, {"data": [{"id": "scripted", "object": "model"}], "models": []})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"unparsed": raw.decode(errors="replace")}
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return send_json(self, {"input_tokens": 1})
        turn = next_turn(body, path)
        if path.endswith("/messages"):
            anthropic(self, body, turn)
        elif path.endswith("/responses"):
            responses(self, body, turn)
        elif path.endswith("/chat/completions"):
            chat(self, body, turn)
        else:
            send_json(self, {})


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"PORT {server.server_address[1]}", flush=True)
server.serve_forever()
