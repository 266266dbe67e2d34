"""Official `openai` SDK: a standard tool-calling loop, unchanged, against memproxy's explicit mode.

Usage: explicit_tools.py BASE_URL API_KEY (BASE_URL ends in /explicit/v1). Prints "ok <check>" per
passed check; any failure raises. The agent's model is memproxy's scripted mock: it saves a fact,
calls get_weather, and after the result answers.
"""
import json
import sys

import openai

base_url, key = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=20,
                       default_headers={"x-memproxy-user": "sdk-tools"})
tools = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def get_weather(city):
    return json.dumps({"city": city, "sky": "sunny", "celsius": 24})


def run(messages, stream):
    """The loop of the SDK's documentation: call, run the requested tools, call again."""
    while True:
        if stream:
            with client.chat.completions.stream(model="mock-model", messages=messages, tools=tools) as s:
                for _ in s:
                    pass
                completion = s.get_final_completion()
        else:
            completion = client.chat.completions.create(model="mock-model", messages=messages, tools=tools)
        choice = completion.choices[0]
        if choice.finish_reason != "tool_calls":
            return choice, messages
        messages.append(choice.message)
        for call in choice.message.tool_calls:
            assert call.function.name == "get_weather", call
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


choice, messages = run([{"role": "user", "content": "Weather in Lisbon? I travel there Friday."}], False)
assert choice.finish_reason == "stop" and "sunny" in choice.message.content, choice
assert [m["role"] if isinstance(m, dict) else m.role for m in messages] == ["user", "assistant", "tool"]
print("ok whole")

choice, messages = run([{"role": "user", "content": "And tomorrow in Lisbon?"}], True)
assert choice.finish_reason == "stop" and "sunny" in choice.message.content, choice
assert len(messages) == 3, messages
print("ok stream")
