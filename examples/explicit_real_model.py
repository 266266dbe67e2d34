#!/usr/bin/env python3
"""Drive a short multi-session dialogue through memproxy's explicit mode with a real model.

Starts memproxy (the built binary) on a fresh data directory in explicit mode, in front of an
OpenAI-compatible server with a real small model (see ../shared/tools/real-llm/: `bash setup.sh`,
then `node server.mjs --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --port 8090`), sends
each session as a new chat (only through the agent's memory can anything carry over), and prints
every step of every turn from the step trace, then a tally.

    cargo build --release
    python3 examples/explicit_real_model.py --llm http://127.0.0.1:8090/v1 \
        --binary target/release/memproxy --model-dir .memproxy

Standard library only. Not part of CI: a real model takes minutes.
"""

import argparse
import json
import time

from realmodel import call, start_explicit, wait_ready

SESSIONS = [
    ["Hi! My name is Zoe and I live in Lisbon.", "I have a dog called Pixel."],
    ["What is my name?", "What is my dog called?"],
    ["I moved to Porto last month."],
    ["Which city do I live in now?"],
]
# (session, turn) -> words the answer must contain to count as remembered.
EXPECT = {(1, 0): ["zoe"], (1, 1): ["pixel"], (3, 0): ["porto"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="http://127.0.0.1:8090/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    parser.add_argument("--binary", default="target/release/memproxy")
    parser.add_argument("--model-dir", default=".memproxy", help="data dir holding lib/ and models/ (scripts/fetch-model)")
    parser.add_argument("--port", type=int, default=18181)
    parser.add_argument("--context-window", type=int, default=8192)
    parser.add_argument("--require-tool-choice", default="true")
    args = parser.parse_args()

    settings = (f"context_window_tokens = {args.context_window}\n"
                f"require_tool_choice = {args.require_tool_choice}\n")
    proxy, base, data = start_explicit(args, "memproxy-explicit-", settings)
    tally = {"turns": 0, "steps": 0, "failed": 0, "remembered": 0, "expected": len(EXPECT), "seconds": 0.0}
    try:
        wait_ready(base)
        for s, session in enumerate(SESSIONS):
            print(f"\n=== session {s + 1} (new chat) ===")
            history = []
            for t, text in enumerate(session):
                history.append({"role": "user", "content": text})
                started = time.time()
                headers, body = call(base + "/v1/chat/completions",
                                     {"model": args.model, "messages": history, "temperature": 0},
                                     {"x-memproxy-user": "zoe"})
                elapsed = time.time() - started
                reply = body["choices"][0]["message"]["content"]
                history.append({"role": "assistant", "content": reply})
                _, trace = call(base + "/memproxy/v1/agents/default/steps?user=zoe&turns=1")
                print(f"\nuser: {text}")
                for step in trace["data"]:
                    print(f"  step {step['step']}: {step['tool']} {step['arguments'][:120]} -> "
                          f"{step['status']}: {step['result'][:120]!r} "
                          f"({step['prompt_tokens']}+{step['completion_tokens']} tok, {step['latency_ms'] / 1000:.1f} s)")
                    tally["failed"] += step["status"] == "failed"
                print(f"agent: {reply}")
                print(f"  [{headers.get('x-memproxy-steps')} steps, stop={headers.get('x-memproxy-stop')}, "
                      f"{elapsed:.1f} s, overhead {headers.get('x-memproxy-overhead-ms')} ms]")
                tally["turns"] += 1
                tally["steps"] += int(headers.get("x-memproxy-steps", 0))
                tally["seconds"] += elapsed
                words = EXPECT.get((s, t))
                if words:
                    ok = all(w in reply.lower() for w in words)
                    tally["remembered"] += ok
                    print(f"  remembered {words}: {'yes' if ok else 'NO'}")
        _, agent = call(base + "/memproxy/v1/users/zoe/agents/default")
        print("\n=== core memory at the end ===")
        for block in agent["blocks"]:
            print(f"<{block['label']}> {block['value']}")
        print(f"archival passages: {agent['counts']['passages']}, log messages: {agent['counts']['messages']}")
        print("\n=== tally ===")
        print(json.dumps(tally))
    finally:
        proxy.terminate()
        proxy.wait()
        print(f"(data and memproxy.log kept in {data})")


if __name__ == "__main__":
    main()
