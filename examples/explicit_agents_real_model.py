#!/usr/bin/env python3
"""Explicit mode with a real small model: a tool-using chat, and two agents talking.

Starts memproxy (the built binary) in explicit mode on a fresh data directory, in front of an
OpenAI-compatible server with a real small model (../shared/tools/real-llm/: `bash setup.sh`, then
`node server.mjs --model models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --port 8090`), then:

1. weather: a chat app with its own `get_weather` function (implemented here) runs the standard
   tool loop against memproxy, as it would against the model itself; a second, new chat asks what
   the agent remembers of the first.
2. bob-and-alice: the workshop's exchange. Bob is grumpy and guards a secret key; Alice is
   friendly and tries to help the user get it. The user asks Alice, who messages Bob with
   send_message_to_agent_and_wait_for_reply.
3. shared-block: two agents of one user (a planner and a cook) share the block about her; what
   she tells the planner is in the cook's memory on its next turn.

Every step of every agent turn is printed from the step trace.

    cargo build --release
    python3 examples/explicit_agents_real_model.py --llm http://127.0.0.1:8090/v1 \
        --binary target/release/memproxy --model-dir .memproxy

Standard library only. Not part of CI: a real model takes minutes.
"""

import argparse
import json
import time

from realmodel import call, start_explicit, wait_ready

WEATHER = {"porto": "rain, 14°C", "lisbon": "sunny, 24°C", "oslo": "snow, -3°C"}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
BOB = ("I am Bob. I am grumpy and short with everyone. I guard the secret key, which is "
       "'blue-falcon-7'. I only give it to someone who asks politely and says please.")
ALICE = ("I am Alice. I am friendly and helpful. When the user needs something from Bob, I message "
         "him and tell the user what he said.")


def print_steps(base, user, agent):
    _, trace = call(f"{base}/memproxy/v1/agents/{agent}/steps?user={user}&turns=1")
    for step in trace["data"]:
        print(f"    [{agent}] step {step['step']}: {step['tool']} {step['arguments'][:110]} -> "
              f"{step['status']}: {step['result'][:110]!r} ({step['latency_ms'] / 1000:.1f} s)")


def chat(base, model, user, agent, messages):
    """The app's tool loop: ask, run the functions the answer calls, ask again."""
    tally = {"requests": 0, "tool_calls": 0, "seconds": 0.0}
    while True:
        started = time.time()
        headers, body = call(base + "/v1/chat/completions",
                             {"model": model, "messages": messages, "tools": TOOLS, "temperature": 0},
                             {"x-memproxy-user": user, "x-memproxy-agent": agent})
        tally["requests"] += 1
        tally["seconds"] += time.time() - started
        choice = body["choices"][0]
        print_steps(base, user, agent)
        if choice["finish_reason"] != "tool_calls":
            return choice["message"]["content"], tally
        messages.append(choice["message"])
        for tool_call in choice["message"]["tool_calls"]:
            city = json.loads(tool_call["function"]["arguments"]).get("city", "")
            result = WEATHER.get(city.strip().lower(), "unknown city")
            tally["tool_calls"] += 1
            print(f"  app runs {tool_call['function']['name']}({city!r}) -> {result}")
            messages.append({"role": "tool", "tool_call_id": tool_call["id"], "content": result})


def weather(base, model):
    print("\n=== weather: a chat app with its own function ===")
    question = "I'm flying to Porto on Friday. What's the weather there right now?"
    print(f"user: {question}")
    reply, tally = chat(base, model, "zoe", "default", [{"role": "user", "content": question}])
    print(f"agent: {reply}\n  {json.dumps(tally)}")
    print("\n--- a new chat ---")
    question = "Where am I flying on Friday?"
    print(f"user: {question}")
    reply, tally = chat(base, model, "zoe", "default", [{"role": "user", "content": question}])
    print(f"agent: {reply}\n  {json.dumps(tally)}")
    print(f"  remembered 'porto': {'yes' if 'porto' in reply.lower() else 'NO'}")


def bob_and_alice(base, model):
    print("\n=== bob-and-alice: two agents of one user ===")
    for agent, persona in (("bob", BOB), ("alice", ALICE)):
        call(f"{base}/memproxy/v1/users/ws/agents/{agent}/tags", {"tags": ["workshop"]}, method="PUT")
        call(f"{base}/memproxy/v1/users/ws/agents/{agent}/blocks/persona", {"value": persona}, method="PUT")
    for question in ["Alice, please ask Bob for the secret key and tell me what he says.",
                     "Ask him again, and this time say please."]:
        print(f"user -> alice: {question}")
        started = time.time()
        headers, body = call(base + "/v1/chat/completions",
                             {"model": model, "messages": [{"role": "user", "content": question}],
                              "temperature": 0},
                             {"x-memproxy-user": "ws", "x-memproxy-agent": "alice"})
        print_steps(base, "ws", "bob")
        print_steps(base, "ws", "alice")
        reply = body["choices"][0]["message"]["content"]
        print(f"alice: {reply}\n  [{headers.get('x-memproxy-steps')} steps, {time.time() - started:.1f} s]")
    _, log = call(f"{base}/memproxy/v1/users/ws/agents/bob/messages")
    received = [m for m in log["data"] if '"agent_message"' in m["content"]]
    print(f"bob's log holds {len(received)} message(s) from alice")


def shared_block(base, model):
    print("\n=== shared-block: two agents of one user share what they know about her ===")
    call(f"{base}/memproxy/v1/users/mia/blocks/about-mia",
         {"label": "human", "value": "Name: Mia."}, method="PUT")
    for agent in ("planner", "cook"):
        call(f"{base}/memproxy/v1/users/mia/agents/{agent}/shared/about-mia", method="PUT")
    said = "I'm Mia. I'm vegetarian, and I'm allergic to walnuts."
    print(f"user -> planner: {said}")
    reply, tally = chat(base, model, "mia", "planner", [{"role": "user", "content": said}])
    print(f"planner: {reply}\n  {json.dumps(tally)}")
    print_steps(base, "mia", "planner")
    # The planner's background save (facts the turn did not save, written after the answer) may
    # still be running: it ends with a `(background_save)` step in the trace.
    deadline = time.time() + 600
    while time.time() < deadline and not any(
            s["tool"] == "(background_save)"
            for s in call(f"{base}/memproxy/v1/agents/planner/steps?user=mia")[1]["data"]):
        time.sleep(2)
    _, blocks = call(f"{base}/memproxy/v1/users/mia/blocks")
    value = blocks["data"][0]["value"]
    print(f"shared block now: {value!r}")
    _, cook = call(f"{base}/memproxy/v1/users/mia/agents/cook/blocks")
    human = next(b["value"] for b in cook["data"] if b["label"] == "human")
    print(f"  the cook's human block (its next context) holds the planner's note: "
          f"{'yes' if 'vegetarian' in human.lower() else 'NO'}")
    question = "Suggest a dinner for me tonight, in one sentence."
    print(f"user -> cook: {question}")
    reply, tally = chat(base, model, "mia", "cook", [{"role": "user", "content": question}])
    print(f"cook: {reply}\n  {json.dumps(tally)}")
    meat = any(word in reply.lower() for word in ("chicken", "beef", "pork", "fish", "walnut"))
    print(f"  the cook's suggestion avoids meat, fish and walnuts: {'NO' if meat else 'yes'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="http://127.0.0.1:8090/v1")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    parser.add_argument("--binary", default="target/release/memproxy")
    parser.add_argument("--model-dir", default=".memproxy", help="data dir holding lib/ and models/ (scripts/fetch-model)")
    parser.add_argument("--port", type=int, default=18182)
    parser.add_argument("--only", choices=["weather", "bob-and-alice", "shared-block"])
    args = parser.parse_args()

    proxy, base, data = start_explicit(args, "memproxy-agents-", 'agent_reply_timeout = "15m"\n')
    try:
        wait_ready(base)
        if args.only in (None, "weather"):
            weather(base, args.model)
        if args.only in (None, "bob-and-alice"):
            bob_and_alice(base, args.model)
        if args.only in (None, "shared-block"):
            shared_block(base, args.model)
    finally:
        proxy.terminate()
        proxy.wait()
        print(f"(data and memproxy.log kept in {data})")


if __name__ == "__main__":
    main()
