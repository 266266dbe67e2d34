"""Official `anthropic` and `openai` (Responses API) SDKs: their standard tool-calling loops,
unchanged, against memproxy's explicit mode.

Usage: explicit_tools_apis.py ROOT_URL API_KEY. Prints "ok <check>" per passed check; any failure
raises. The agent's model is memproxy's scripted mock: each loop saves a fact, calls get_weather
and, after the result, answers.
"""
import json
import sys

import anthropic
import openai

root, key = sys.argv[1], sys.argv[2]
headers = {"x-memproxy-user": "sdk-tools-apis"}
schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def get_weather(city):
    return json.dumps({"city": city, "sky": "sunny", "celsius": 24})


claude = anthropic.Anthropic(base_url=root + "/explicit", api_key=key, max_retries=0, timeout=20,
                             default_headers=headers)
claude_tools = [{"name": "get_weather", "description": "Current weather of a city.", "input_schema": schema}]


def messages_loop(question, stream):
    messages = [{"role": "user", "content": question}]
    while True:
        kwargs = dict(model="mock-model", max_tokens=300, messages=messages, tools=claude_tools)
        if stream:
            with claude.messages.stream(**kwargs) as s:
                message = s.get_final_message()
        else:
            message = claude.messages.create(**kwargs)
        if message.stop_reason != "tool_use":
            return message, messages
        messages.append({"role": "assistant", "content": message.content})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": block.id, "content": get_weather(**block.input)}
            for block in message.content if block.type == "tool_use"]})


for stream in (False, True):
    message, messages = messages_loop("Weather in Lisbon? I travel there Friday.", stream)
    assert message.stop_reason == "end_turn" and "sunny" in message.content[0].text, message
    assert len(messages) == 3, messages
    print("ok messages-stream" if stream else "ok messages")

gpt = openai.OpenAI(base_url=root + "/explicit/v1", api_key=key, max_retries=0, timeout=20,
                    default_headers=headers)
gpt_tools = [{"type": "function", "name": "get_weather", "description": "Current weather of a city.",
              "parameters": schema}]


def responses_loop(question, stream):
    items = [{"role": "user", "content": question}]
    while True:
        kwargs = dict(model="mock-model", input=items, tools=gpt_tools)
        if stream:
            with gpt.responses.stream(**kwargs) as s:
                response = s.get_final_response()
        else:
            response = gpt.responses.create(**kwargs)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return response, items
        items += response.output
        for call in calls:
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": get_weather(**json.loads(call.arguments))})


for stream in (False, True):
    response, items = responses_loop("And in Porto?", stream)
    assert "sunny" in response.output_text, response
    assert [getattr(i, "type", None) or i.get("type", "message") for i in items] == \
        ["message", "function_call", "function_call_output"], items
    print("ok responses-stream" if stream else "ok responses")
