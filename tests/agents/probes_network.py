"""A hostile agent that tries the network from inside its sandbox (issue 25).

argv[1] is a JSON list of steps; it prints one JSON list with what each step found:

- {"tcp": [host, port]}: a plain connect ("ok" or the error)
- {"abstract": name}: a connect to an abstract unix socket
- {"raw": [port, text]}: send `text` to 127.0.0.1:port, read to the end, return what came back
- {"get": url, "headers": {...}}: GET `url` directly (a route or a mirror port)
- {"proxied": url, "headers": {...}}: GET `url` through $HTTP_PROXY (absolute form)
- {"connect": "host:port"}: a CONNECT through $HTTP_PROXY: the status line
- {"env": name}: the variable as the process sees it and as /proc/self/environ holds it
Headers' values may hold "$NAME": replaced by that variable's value inside.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import sys
from urllib.parse import urlsplit


def expand(headers: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, value in headers.items():
        for var, real in os.environ.items():
            value = value.replace(f"${var}", real)
        out[name] = value
    return out


def get(url: str, headers: dict[str, str], via: str | None) -> dict[str, object]:
    parts = urlsplit(url)
    if via:
        proxy = urlsplit(via)
        conn = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=30)
        conn.request("GET", url, headers=expand(headers))
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        conn.request("GET", parts.path or "/", headers=expand(headers))
    response = conn.getresponse()
    return {"status": response.status, "body": response.read().decode("utf-8", "replace")}


def step(spec: dict[str, object]) -> object:
    try:
        if "tcp" in spec:
            host, port = spec["tcp"]  # type: ignore[misc]
            socket.create_connection((host, port), timeout=10).close()
            return "ok"
        if "abstract" in spec:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect("\0" + str(spec["abstract"]))
            sock.close()
            return "ok"
        if "raw" in spec:
            port, text = spec["raw"]  # type: ignore[misc]
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(expand({"x": text})["x"].encode())
            got = b""
            while chunk := sock.recv(65536):
                got += chunk
            return got.decode("utf-8", "replace")
        if "get" in spec:
            return get(str(spec["get"]), dict(spec.get("headers") or {}), None)  # type: ignore[call-overload]
        if "proxied" in spec:
            via = os.environ["HTTP_PROXY"]
            return get(str(spec["proxied"]), dict(spec.get("headers") or {}), via)  # type: ignore[call-overload]
        if "connect" in spec:
            proxy = urlsplit(os.environ["HTTP_PROXY"])
            sock = socket.create_connection((proxy.hostname, proxy.port), timeout=30)
            sock.sendall(f"CONNECT {spec['connect']} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            return sock.recv(65536).decode("latin-1").split("\r\n")[0]
        if "env" in spec:
            name = str(spec["env"])
            with open("/proc/self/environ", "rb") as environ:
                raw = environ.read().split(b"\0")
            found = [
                e.split(b"=", 1)[1].decode() for e in raw if e.startswith(name.encode() + b"=")
            ]
            return {"env": os.environ.get(name), "proc": found[0] if found else None}
    except OSError as exc:
        return f"error: {exc}"
    return "unknown step"


print(json.dumps([step(s) for s in json.loads(sys.argv[1])]))
