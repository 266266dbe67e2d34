"""`add_memory` over MCP with a real memory LLM: facts that repeat, change and add up, saved through
`memproxy mcp` (stdio) by the official MCP Python SDK; prints what reconciliation did with each and
the memories left.

Usage (the SDK venv from scripts/setup-sdk-venv, a real model from ../shared/tools/real-llm):
  target/sdk-venv/bin/python examples/mcp_real_model.py --llm http://127.0.0.1:8092/v1 \\
      --binary target/release/memproxy --model-dir target/test-data
"""

import argparse
import asyncio
import json
import os
import shutil
import tempfile

from mcp import ClientSession, StdioServerParameters, stdio_client

FACTS = [
    "The user works as a nurse in Leeds.",
    "The user works as a nurse in Leeds.",
    "The user has a dog named Biscuit.",
    "The user no longer works as a nurse; they now teach chemistry at a school in Leeds.",
    "The user's dog Biscuit is a beagle.",
    "The user is allergic to penicillin.",
    "The user moved from Leeds to York in March.",
]


async def main(args):
    data = tempfile.mkdtemp(prefix="mcp-real-")
    for part in ("lib", "models"):
        shutil.copytree(os.path.join(args.model_dir, part), os.path.join(data, part))
    config = os.path.join(data, "memproxy.toml")
    with open(config, "w") as f:
        f.write(f'data_dir = "{data}"\n[upstream]\nurl = "{args.llm}"\nfirst_byte_timeout = "10m"\n'
                f'[memory.llm]\nmodel = "{args.model}"\n')
    params = StdioServerParameters(command=args.binary,
                                   args=["mcp", "--config", config, "--user", "sam"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            for fact in FACTS:
                result = await client.call_tool("add_memory", {"text": fact})
                answer = json.loads(result.content[0].text)
                print(f"{answer.get('event', answer)!s:12} id={answer.get('id')} "
                      f"replaced={answer.get('replaced')}  {fact}", flush=True)
            rows = json.loads((await client.call_tool("list_memories", {})).content[0].text)
            print("\nlive memories:")
            for row in rows["memories"]:
                print(f"  {row['id']:3} {row['text']}")
    print(f"\ndata directory: {data}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--llm", required=True)
    parser.add_argument("--binary", default="target/release/memproxy")
    parser.add_argument("--model-dir", default="target/test-data")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct-q4_k_m")
    asyncio.run(main(parser.parse_args()))
