"""Official `openai` SDK against a running memproxy: usage that chat apps rely on.

Usage: conformance.py BASE_URL API_KEY. Prints "ok <check>" per passed check; any failure raises.
The upstream behind memproxy is memproxy's scripted mock (model names pick its behaviour).
"""
import sys

import openai

base_url, key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=20)
messages = [{"role": "user", "content": "hello sdk"}]

completion = client.chat.completions.create(model="mock-model", messages=messages)
assert completion.choices[0].message.content == "echo: hello sdk", completion
assert completion.usage.total_tokens > 0
print("ok create")

chunks = list(client.chat.completions.create(model="mock-model", messages=messages, stream=True))
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert text == "echo: hello sdk", text
assert all(c.usage is None for c in chunks), "usage appeared although not requested"
with_usage = list(client.chat.completions.create(
    model="mock-model", messages=messages, stream=True, stream_options={"include_usage": True}))
assert with_usage[-1].usage.total_tokens > 0 and with_usage[-1].choices == []
print("ok stream")

tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
called = client.chat.completions.create(model="mock-tool", messages=messages, tools=tools)
call = called.choices[0].message.tool_calls[0]
assert (call.function.name, call.function.arguments) == ("get_weather", '{"city":"Paris"}'), call
print("ok tools")

with client.chat.completions.stream(model="mock-tool", messages=messages, tools=tools) as stream:
    for _ in stream:
        pass
    final = stream.get_final_completion()
call = final.choices[0].message.tool_calls[0]
assert (call.function.name, call.function.arguments) == ("get_weather", '{"city":"Paris"}'), call
print("ok stream-tools")

try:
    client.chat.completions.create(model="mock-error-429", messages=messages)
    raise AssertionError("expected RateLimitError")
except openai.RateLimitError as error:
    assert error.status_code == 429 and error.response.headers["retry-after"] == "7"
print("ok rate-limit")

try:
    client.chat.completions.create(model="mock-model", messages=[])
    raise AssertionError("expected BadRequestError")
except openai.BadRequestError as error:
    assert error.body["code"] == "invalid_request" and error.body["param"] == "messages", error.body
print("ok bad-request")

try:
    openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    raise AssertionError("expected AuthenticationError")
except openai.AuthenticationError:
    pass
print("ok auth")

# Explicit mode: the SDK sees an ordinary completion while memproxy runs an agent loop (the mock
# answers the agent in plain text, which is taken as its reply).
agent = openai.OpenAI(base_url=base_url.replace("/v1", "/explicit/v1"), api_key=key, max_retries=0, timeout=20)
raw = agent.chat.completions.with_raw_response.create(model="mock-model", messages=messages)
assert raw.headers["x-memproxy-mode"] == "explicit" and raw.headers["x-memproxy-steps"] == "1"
reply = raw.parse()
assert reply.choices[0].message.content.startswith("echo: ") and "hello sdk" in reply.choices[0].message.content
assert reply.usage.total_tokens > 0
follow_up = messages + [{"role": "assistant", "content": "hi"}, {"role": "user", "content": "again"}]
with agent.chat.completions.stream(model="mock-model", messages=follow_up,
                                   stream_options={"include_usage": True}) as stream:
    for _ in stream:
        pass
    final = stream.get_final_completion()
assert "again" in final.choices[0].message.content and final.usage.total_tokens > 0, final
print("ok explicit")
