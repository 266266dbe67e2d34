"""What the real-model examples share: HTTP calls to memproxy, and starting the built binary in
explicit mode on a fresh data directory in front of a real model. Standard library only."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request


def call(url, body=None, headers=None, method=None, timeout=900):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method or ("POST" if data else "GET"))
    request.add_header("content-type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return dict(response.headers), json.loads(response.read())


def wait_ready(base, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            call(base + "/healthz")
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.5)
    sys.exit("memproxy did not start; see its log above")


def start_explicit(args, prefix, explicit_settings):
    """Starts `args.binary` in explicit mode on a fresh data directory (the embedding model copied
    from `args.model_dir`) in front of `args.llm`, on `args.port`, with `explicit_settings` (TOML
    lines) under `[explicit]`. Returns `(process, base url, data dir)`."""
    data = tempfile.mkdtemp(prefix=prefix)
    for part in ("lib", "models"):
        shutil.copytree(os.path.join(args.model_dir, part), os.path.join(data, part))
    config = os.path.join(data, "memproxy.toml")
    with open(config, "w") as f:
        f.write(f'listen = "127.0.0.1:{args.port}"\nmode = "explicit"\ndata_dir = "{data}"\n'
                f'[upstream]\nurl = "{args.llm}"\nfirst_byte_timeout = "15m"\ntotal_timeout = "20m"\n'
                f'[explicit]\n{explicit_settings}')
    log = open(os.path.join(data, "memproxy.log"), "w")
    proxy = subprocess.Popen([args.binary, "serve", "--config", config], stdout=log, stderr=log)
    return proxy, f"http://127.0.0.1:{args.port}", data
