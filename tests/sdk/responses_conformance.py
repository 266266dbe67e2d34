"""Official `openai` SDK's Responses API against a running memproxy (translated to the scripted
Chat Completions upstream, which answers `echo: <last user message>`).

Usage: responses_conformance.py BASE_URL API_KEY [native]. Prints "ok <check>" per passed check;
any failure raises. Model names pick the mock's behaviour (`mock-tool`, `mock-error-429`).
`native`: memproxy relays to an upstream that speaks Responses (the mock does), so the checks of
translation refusals and dropped tools, which only the translation makes, are left out.
"""
import sys

import openai

base_url, key = sys.argv[1], sys.argv[2]
native = sys.argv[3:] == ["native"]
client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=20)

first = client.responses.create(model="mock-model", input="My name is Ada.",
                                instructions="Be brief.")
assert first.object == "response" and first.status == "completed", first
assert first.output_text == "echo: My name is Ada.", first.output_text
assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0, first.usage
# What the SDK's types declare of the details, present where memproxy writes them (a same-API
# relay passes the upstream's own usage as it is).
details = first.usage.input_tokens_details
assert details is None or details.model_dump().get("cache_write_tokens") == 0, first.usage
print("ok create")

second = client.responses.create(model="mock-model", input="What is my name?",
                                 previous_response_id=first.id)
assert second.output_text == "echo: What is my name?", second.output_text
assert second.previous_response_id == first.id, second
print("ok previous-response")

with client.responses.stream(model="mock-model", input="hello stream") as stream:
    deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
    final = stream.get_final_response()
assert "".join(deltas) == "echo: hello stream", deltas
assert final.output_text == "echo: hello stream" and final.status == "completed", final
print("ok stream")

events = list(client.responses.create(model="mock-model", input="raw events", stream=True))
kinds = [e.type for e in events]
assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
assert [e.sequence_number for e in events] == list(range(len(events))), kinds
print("ok stream-events")

tools = [{"type": "function", "name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
called = client.responses.create(model="mock-tool", input="weather?", tools=tools)
call = [item for item in called.output if item.type == "function_call"][0]
assert (call.name, call.arguments) == ("get_weather", '{"city":"Paris"}'), called.output
followed = client.responses.create(model="mock-model", previous_response_id=called.id, tools=tools,
                                   input=[{"type": "function_call_output", "call_id": call.call_id,
                                           "output": "21 degrees"}])
assert followed.status == "completed", followed
print("ok tools")

with client.responses.stream(model="mock-tool", input="weather?", tools=tools) as stream:
    final = stream.get_final_response()
call = [item for item in final.output if item.type == "function_call"][0]
assert (call.name, call.arguments) == ("get_weather", '{"city":"Paris"}'), final.output
print("ok stream-tools")

fetched = client.responses.retrieve(first.id)
assert fetched.id == first.id and fetched.output_text == first.output_text, fetched
client.responses.delete(first.id)
try:
    client.responses.retrieve(first.id)
    raise AssertionError("expected NotFoundError")
except openai.NotFoundError:
    pass
print("ok retrieve-delete")

try:
    client.responses.create(model="mock-model", input="x", previous_response_id="resp_missing")
    raise AssertionError("expected BadRequestError")
except openai.BadRequestError as error:
    assert error.body["code"] == "previous_response_not_found", error.body
if not native:
    try:
        client.responses.create(model="mock-model", input=[{"type": "item_reference", "id": "x"}])
        raise AssertionError("expected BadRequestError")
    except openai.BadRequestError as error:
        assert "cannot be translated" in error.body["message"], error.body
    raw = client.responses.with_raw_response.create(model="mock-model", input="x",
                                                    tools=[{"type": "web_search_preview"}])
    assert raw.headers["x-memproxy-dropped-tools"] == "web_search_preview", raw.headers
print("ok bad-request")

try:
    client.responses.create(model="mock-error-429", input="x")
    raise AssertionError("expected RateLimitError")
except openai.RateLimitError as error:
    assert error.status_code == 429
print("ok rate-limit")

try:
    openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).responses.create(
        model="mock-model", input="x")
    raise AssertionError("expected AuthenticationError")
except openai.AuthenticationError:
    pass
print("ok auth")
