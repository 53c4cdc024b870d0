"""A real gRPC server and client for crates/proxy/tests/it/grpc.rs.

grpcio is the gRPC project's own implementation (C-core under Python); generic handlers on raw
bytes need no protoc. The service is echo.Echo:

  Say    unary:            "sleep:<s>" sleeps first; "fail:<message>" fails with
                           FAILED_PRECONDITION and trailing metadata x-detail; otherwise the
                           reply is JSON {server, echo, metadata} and the trailing metadata
                           carries x-served-by.
  Count  server streaming: the request is a number n; n replies "<server>:<i>".
  Chat   bidirectional:    every message m is answered "<server>:<m>" at once.

The server also answers echo.Other/Say and echo.Other/Ask as echo.Echo/Say does (two services
and methods for GRPCRoute's method matches).

  python echo.py serve NAME [CERT KEY]   prints the port it listens on (127.0.0.1), serves until
                                         stdin closes, then stops gracefully (GOAWAY; running
                                         calls finish within 10 s)
  python echo.py call TARGET AUTHORITY PATH MESSAGE [KEY=VALUE...]   a unary call to any
                                         method PATH with request metadata; prints the code,
                                         the reply and the initial (header) metadata
  python echo.py CASE TARGET AUTHORITY [ARGS...]   runs one client case against TARGET
                                         (host:port, h2c) with :authority AUTHORITY and prints
                                         one JSON object
"""

import json
import queue
import sys
import threading
import time
from concurrent import futures

import grpc


def ident(data):
    return data


def serve(name, cert=None, key=None):
    def say(request, context):
        metadata = dict(context.invocation_metadata())
        if request.startswith(b"fail:"):
            context.set_trailing_metadata((("x-detail", "custom"),))
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, request[5:].decode())
        if request.startswith(b"sleep:"):
            time.sleep(float(request[6:]))
        context.set_trailing_metadata((("x-served-by", name),))
        reply = {"server": name, "echo": request.decode(), "metadata": metadata}
        return json.dumps(reply).encode()

    def count(request, context):
        for i in range(int(request)):
            yield f"{name}:{i}".encode()

    def chat(requests, context):
        for message in requests:
            yield f"{name}:{message.decode()}".encode()

    handler = grpc.method_handlers_generic_handler(
        "echo.Echo",
        {
            "Say": grpc.unary_unary_rpc_method_handler(say, ident, ident),
            "Count": grpc.unary_stream_rpc_method_handler(count, ident, ident),
            "Chat": grpc.stream_stream_rpc_method_handler(chat, ident, ident),
        },
    )
    other = grpc.method_handlers_generic_handler(
        "echo.Other",
        {
            "Say": grpc.unary_unary_rpc_method_handler(say, ident, ident),
            "Ask": grpc.unary_unary_rpc_method_handler(say, ident, ident),
        },
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=64),
        handlers=(handler, other),
        options=[("grpc.so_reuseport", 0)],
    )
    if cert:
        with open(cert, "rb") as c, open(key, "rb") as k:
            credentials = grpc.ssl_server_credentials([(k.read(), c.read())])
        port = server.add_secure_port("127.0.0.1:0", credentials)
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    sys.stdin.read()
    server.stop(grace=10).wait()


def channel(target, authority):
    return grpc.insecure_channel(target, options=[("grpc.default_authority", authority)])


def failure(error):
    return {"code": error.code().name, "details": error.details(),
            "trailing": dict(error.trailing_metadata() or ())}


def unary(target, authority, message, timeout=None):
    with channel(target, authority) as ch:
        say = ch.unary_unary("/echo.Echo/Say", request_serializer=ident, response_deserializer=ident)
        try:
            reply, call = say.with_call(message.encode(), timeout=float(timeout) if timeout else None)
        except grpc.RpcError as error:
            return failure(error)
        return {"code": call.code().name, "reply": json.loads(reply),
                "trailing": dict(call.trailing_metadata() or ())}


def call(target, authority, path, message, *metadata):
    pairs = tuple(tuple(pair.split("=", 1)) for pair in metadata)
    with channel(target, authority) as ch:
        method = ch.unary_unary(path, request_serializer=ident, response_deserializer=ident)
        try:
            reply, call = method.with_call(message.encode(), metadata=pairs, timeout=10)
        except grpc.RpcError as error:
            return dict(failure(error), initial=dict(error.initial_metadata() or ()))
        return {"code": call.code().name, "reply": json.loads(reply),
                "initial": dict(call.initial_metadata() or ())}


def stream(target, authority, n):
    with channel(target, authority) as ch:
        count = ch.unary_stream("/echo.Echo/Count", request_serializer=ident, response_deserializer=ident)
        try:
            call = count(n.encode())
            replies = [r.decode() for r in call]
        except grpc.RpcError as error:
            return failure(error)
        return {"code": call.code().name, "replies": replies}


def bidi(target, authority, *messages):
    """Sends each message only after the reply to the one before arrived: the stream must
    flow both ways while neither side has ended. "pause:<s>" waits instead of sending."""
    with channel(target, authority) as ch:
        chat = ch.stream_stream("/echo.Echo/Chat", request_serializer=ident, response_deserializer=ident)
        outbox = queue.Queue()
        call = chat(iter(outbox.get, None))
        replies = []
        try:
            for message in messages:
                if message.startswith("pause:"):
                    time.sleep(float(message[6:]))
                    continue
                outbox.put(message.encode())
                replies.append(next(call).decode())
            outbox.put(None)
            rest = [r.decode() for r in call]
        except grpc.RpcError as error:
            return dict(failure(error), replies=replies)
        return {"code": call.code().name, "replies": replies, "rest": rest}


def churn(target, authority, seconds, streams):
    """Unary calls from 8 threads and `streams` long bidirectional streams (a message every
    50 ms) for `seconds`; every failure is listed."""
    started = time.monotonic()
    deadline = started + float(seconds)
    failures = []
    counts = {"unary": 0, "bidi_messages": 0}
    by_server = {}
    lock = threading.Lock()
    ch = channel(target, authority)
    say = ch.unary_unary("/echo.Echo/Say", request_serializer=ident, response_deserializer=ident)
    chat = ch.stream_stream("/echo.Echo/Chat", request_serializer=ident, response_deserializer=ident)

    def unary_loop():
        while time.monotonic() < deadline:
            try:
                reply = json.loads(say(b"churn", timeout=10))
                with lock:
                    counts["unary"] += 1
                    by_server[reply["server"]] = by_server.get(reply["server"], 0) + 1
            except grpc.RpcError as error:
                with lock:
                    failures.append(dict(failure(error), kind="unary",
                                         at=round(time.monotonic() - started, 2)))

    def bidi_loop(index):
        outbox = queue.Queue()
        call = chat(iter(outbox.get, None))
        sent = 0
        try:
            while time.monotonic() < deadline:
                outbox.put(f"{index}-{sent}".encode())
                reply = next(call).decode()
                if not reply.endswith(f":{index}-{sent}"):
                    raise ValueError(f"stream {index}: reply {reply!r} to message {sent}")
                sent += 1
                with lock:
                    counts["bidi_messages"] += 1
                time.sleep(0.05)
            outbox.put(None)
            for _ in call:
                pass
            if call.code() != grpc.StatusCode.OK:
                raise ValueError(f"stream {index} ended {call.code().name}")
        except grpc.RpcError as error:
            with lock:
                failures.append(dict(failure(error), kind="bidi", sent=sent))
        except Exception as error:  # noqa: BLE001 - reported to the test
            with lock:
                failures.append({"kind": "bidi", "error": str(error)})

    threads = [threading.Thread(target=unary_loop) for _ in range(8)]
    threads += [threading.Thread(target=bidi_loop, args=(i,)) for i in range(int(streams))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ch.close()
    return {"counts": counts, "by_server": by_server, "failures": failures}


def main():
    command, args = sys.argv[1], sys.argv[2:]
    if command == "serve":
        serve(*args)
        return
    cases = {"unary": unary, "call": call, "stream": stream, "bidi": bidi, "churn": churn}
    print(json.dumps(cases[command](*args)), flush=True)


if __name__ == "__main__":
    main()
