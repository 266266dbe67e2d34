"""Use memproxy from the official OpenAI Python client: only base_url changes.

    pip install openai
    MEMPROXY_URL=http://127.0.0.1:8080 python examples/python_openai.py
"""
import os

from openai import OpenAI

client = OpenAI(
    base_url=os.environ.get("MEMPROXY_URL", "http://127.0.0.1:8080") + "/v1",
    # A memproxy key when auth is on; otherwise your upstream key, which memproxy forwards
    # only when it has none configured itself.
    api_key=os.environ.get("MEMPROXY_KEY", "unused"),
    default_headers={"X-Memproxy-User": "alice"},
)
model = os.environ.get("MODEL", "gpt-4o-mini")

reply = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "My name is Alice."}]
)
print(reply.choices[0].message.content)

for chunk in client.chat.completions.create(
    model=model, stream=True, messages=[{"role": "user", "content": "What is my name?"}]
):
    if chunk.choices and chunk.choices[0].delta.content:
        print(chunk.choices[0].delta.content, end="", flush=True)
print()
