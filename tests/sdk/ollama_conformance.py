"""Official `ollama` Python client against a running memproxy: Ollama's own API, translated to
the scripted Chat Completions upstream, or (with `native`) relayed to the scripted Ollama server.

Usage: ollama_conformance.py BASE_URL API_KEY [native]. Prints "ok <check>" per passed check; any
failure raises. Model names pick the mock's behaviour (`mock-tool`, `mock-error-429`).
"""
import sys

import ollama

base_url, key = sys.argv[1], sys.argv[2]
native = len(sys.argv) > 3 and sys.argv[3] == "native"
client = ollama.Client(host=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=20)
messages = [{"role": "user", "content": "hello sdk"}]

answer = client.chat(model="mock-model", messages=messages, stream=False)
assert answer.message.role == "assistant" and answer.message.content == "echo: hello sdk", answer
assert answer.done and answer.done_reason == "stop", answer
assert answer.eval_count > 0 and answer.prompt_eval_count > 0, answer
assert answer.total_duration > 0, answer
print("ok chat")

parts = list(client.chat(model="mock-model", messages=messages, stream=True))
assert "".join(p.message.content for p in parts) == "echo: hello sdk", parts
assert all(not p.done for p in parts[:-1]) and parts[-1].done, parts
assert parts[-1].done_reason == "stop" and parts[-1].eval_count > 0, parts[-1]
print("ok stream")

def get_weather(city: str) -> str:
    """Weather in a city.

    Args:
      city: The city
    """
    return "21 degrees"

called = client.chat(model="mock-tool", messages=messages, tools=[get_weather], stream=False)
call = called.message.tool_calls[0]
assert (call.function.name, dict(call.function.arguments)) == ("get_weather", {"city": "Paris"}), called
print("ok tools")

streamed = [p for p in client.chat(model="mock-tool", messages=messages, tools=[get_weather],
                                   stream=True)]
calls = [c for p in streamed for c in (p.message.tool_calls or [])]
assert [(c.function.name, dict(c.function.arguments)) for c in calls] == \
    [("get_weather", {"city": "Paris"})], streamed
print("ok stream-tools")

# The tool's result goes back as Ollama's clients send it (named by tool), and the chat goes on.
followed = client.chat(model="mock-model", stream=False, tools=[get_weather], messages=[
    *messages, called.message,
    {"role": "tool", "content": get_weather(**call.function.arguments),
     "tool_name": call.function.name},
])
assert followed.message.content, followed
print("ok tool-result")

generated = client.generate(model="mock-model", prompt="why is the sky blue", system="Be brief.")
assert generated.response == "echo: why is the sky blue" and generated.done, generated
pieces = list(client.generate(model="mock-model", prompt="why is the sky blue", stream=True))
assert "".join(p.response for p in pieces) == "echo: why is the sky blue", pieces
print("ok generate")

listed = client.list()
names = [m.model for m in listed.models]
assert names == (["mock-ollama:1b"] if native else ["mock-model"]), listed
shown = client.show(names[0])
assert shown.capabilities and "completion" in shown.capabilities, shown
print("ok models")

embedded = client.embed(model="mock-embed", input=["first text", "second text"])
assert len(embedded.embeddings) == (1 if native else 2), embedded
assert all(len(vector) > 0 for vector in embedded.embeddings), embedded
print("ok embed")

try:
    client.chat(model="mock-error-429", messages=messages, stream=False)
    raise AssertionError("expected a 429")
except ollama.ResponseError as error:
    assert error.status_code == 429 and error.error, (error.status_code, error.error)
print("ok rate-limit")

if not native:
    try:
        client.chat(model="mock-model", messages=[{"role": "robot", "content": "x"}], stream=False)
        raise AssertionError("expected a 400")
    except ollama.ResponseError as error:
        assert error.status_code == 400 and "messages[0].role" in error.error, error.error
    print("ok bad-request")

try:
    ollama.Client(host=base_url, headers={"Authorization": "Bearer wrong"}).chat(
        model="mock-model", messages=messages, stream=False)
    raise AssertionError("expected a 401")
except ollama.ResponseError as error:
    assert error.status_code == 401 and "key" in error.error, (error.status_code, error.error)
print("ok auth")
