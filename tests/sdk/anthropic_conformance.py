"""Official `anthropic` SDK against a running memproxy (Messages API translated to the scripted
Chat Completions upstream).

Usage: anthropic_conformance.py BASE_URL API_KEY. Prints "ok <check>" per passed check; any
failure raises. Model names pick the mock's behaviour (`mock-tool`, `mock-error-429`).
"""
import sys

import anthropic

base_url, key = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0, timeout=20)
messages = [{"role": "user", "content": "hello sdk"}]

message = client.messages.create(model="mock-model", max_tokens=50, messages=messages,
                                 system="Be brief.", metadata={"user_id": "sdk-user"})
assert message.type == "message" and message.role == "assistant", message
assert message.content[0].type == "text" and message.content[0].text == "echo: hello sdk", message
assert message.stop_reason == "end_turn", message
assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0, message.usage
print("ok create")

with client.messages.stream(model="mock-model", max_tokens=50, messages=messages) as stream:
    events = list(stream)
    final = stream.get_final_message()
started = [e for e in events if e.type == "message_start"][0]
assert started.message.usage.input_tokens > 0, started.message.usage
text = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
assert text == "echo: hello sdk", text
assert final.content[0].text == "echo: hello sdk" and final.stop_reason == "end_turn", final
assert final.usage.output_tokens > 0, final.usage
print("ok stream")

tools = [{"name": "get_weather", "description": "Weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
called = client.messages.create(model="mock-tool", max_tokens=50, messages=messages, tools=tools)
use = [block for block in called.content if block.type == "tool_use"][0]
assert (use.name, use.input) == ("get_weather", {"city": "Paris"}), called
assert called.stop_reason == "tool_use", called
print("ok tools")

with client.messages.stream(model="mock-tool", max_tokens=50, messages=messages,
                            tools=tools) as stream:
    final = stream.get_final_message()
use = [block for block in final.content if block.type == "tool_use"][0]
assert (use.name, use.input) == ("get_weather", {"city": "Paris"}), final
print("ok stream-tools")

# The tool result goes back as a tool_result block, and the conversation continues.
followed = client.messages.create(model="mock-model", max_tokens=50, tools=tools, messages=[
    {"role": "user", "content": "hello sdk"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name,
                                       "input": use.input}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                  "content": "21 degrees"}]},
])
assert followed.content[0].type == "text", followed
print("ok tool-result")

models = client.models.list()
assert [m.id for m in models.data] == ["mock-model"] and models.data[0].type == "model", models
print("ok models")

count = client.messages.count_tokens(model="mock-model", messages=messages)
assert count.input_tokens > 0, count
print("ok count-tokens")

try:
    client.messages.create(model="mock-error-429", max_tokens=50, messages=messages)
    raise AssertionError("expected RateLimitError")
except anthropic.RateLimitError as error:
    assert error.status_code == 429 and error.body["error"]["type"] == "rate_limit_error", error.body
print("ok rate-limit")

try:
    client.messages.create(model="mock-model", max_tokens=50, messages=[])
    raise AssertionError("expected BadRequestError")
except anthropic.BadRequestError as error:
    assert error.body["type"] == "error", error.body
    assert error.body["error"]["type"] == "invalid_request_error", error.body
print("ok bad-request")

try:
    anthropic.Anthropic(base_url=base_url, api_key="wrong", max_retries=0).messages.create(
        model="mock-model", max_tokens=5, messages=messages)
    raise AssertionError("expected AuthenticationError")
except anthropic.AuthenticationError as error:
    assert error.body["error"]["type"] == "authentication_error", error.body
print("ok auth")
