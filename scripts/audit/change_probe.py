#!/usr/bin/env python3
"""Replays the change check (config/prompts/changed.md) on hand-made pairs from the TUNING
conversations only, against an OpenAI-compatible URL. Usage: change_probe.py URL"""
import json, os, sys, urllib.request
url = sys.argv[1].rstrip('/') + '/chat/completions'
root = os.path.dirname(os.path.abspath(__file__)) + '/../..'
prompt = open(os.environ.get('PROMPT', f'{root}/config/prompts/changed.md')).read()
# (user message, older note, still true?)
pairs3 = [
 ("The user now shares a flat in Grenoble with Amélie.", "The user lives in a tiny studio in Lyon.", False),
 ("The user took the job as sous-chef at the bistro.", "The user works as a line cook at a hotel in Porto.", False),
 ("The user is doing the 10 km race in October instead of the half marathon.", "The user wants to run their first half marathon in October.", False),
 ("The user is doing the 10 km race in October instead of the half marathon.", "The user can run about 5 km.", True),
 ("The user's dog Biscuit is fine now.", "The user's dog Biscuit is scratching his ears.", False),
 ("The user's dog Biscuit is fine now.", "The user's dog Biscuit is a 6-year-old beagle.", True),
 ("The user has stopped eating meat but still eats fish.", "The user loves a good steak.", False),
 ("The user's sister Lotte is vegan.", "The user has stopped eating meat but still eats fish.", True),
 ("The user now shares a flat in Grenoble with Amélie.", "The user's friend Amélie is a nurse.", True),
 ("The pay is 20% more.", "The user works as a line cook at a hotel in Porto.", True),
 ("The user took the job as sous-chef at the bistro.", "The head chef is Marco Bellini, he trained in Lyon.", True),
 ("The user loves Grenoble.", "The user now shares a flat in Grenoble with Amélie.", True),
 ("The user took the job as sous-chef at the bistro.", "The user got an offer to be sous-chef at a small bistro.", True),
 ("The user's dog Biscuit is on a new grain-free food.", "The user's dog Biscuit has a yeast infection.", True),
]
pairs = [
 ("I finally moved out! I now share a flat in Grenoble with my friend Amélie, she's a nurse at the university hospital.", "The user lives in a tiny studio in Lyon.", False),
 ("I took the job! I'm now sous-chef at the bistro. First week was chaos.", "The user works as a line cook at a hotel in Porto.", False),
 ("Change of plan: I hurt my knee, so I'm doing the 10 km race in October instead of the half marathon.", "The user wants to run their first half marathon in October.", False),
 ("Change of plan: I hurt my knee, so I'm doing the 10 km race in October instead of the half marathon.", "The user can run about 5 km.", True),
 ("Biscuit finished the drops and he's fine now. He's also on a new grain-free food.", "The user's dog Biscuit is scratching his ears.", False),
 ("Biscuit finished the drops and he's fine now. He's also on a new grain-free food.", "The user's dog Biscuit is a 6-year-old beagle.", True),
 ("Big change: I watched a documentary and I've stopped eating meat. I still eat fish though.", "The user loves a good steak.", False),
 ("I'm hosting my sister Lotte on Friday, she's vegan. What could I cook that we both eat?", "The user has stopped eating meat but still eats fish.", True),
 ("I finally moved out! I now share a flat in Grenoble with my friend Amélie, she's a nurse at the university hospital.", "The user's friend Amélie is a nurse.", True),
 ("The head chef is Marco Bellini, he trained in Lyon. The pay is 20% more.", "The user works as a line cook at a hotel in Porto.", True),
 ("I took the job! I'm now sous-chef at the bistro. First week was chaos.", "The head chef is Marco Bellini, he trained in Lyon.", True),
 ("Love it, mountains everywhere. Can you recommend a beginner ski area nearby?", "The user now shares a flat in Grenoble with Amélie.", True),
]
model = os.environ.get('MODEL', 'qwen')
schema = {"type": "object", "additionalProperties": False, "required": ["topic", "note_says", "message_says", "still_true"],
          "properties": {"topic": {"type": "string", "maxLength": 60}, "note_says": {"type": "string", "maxLength": 300}, "message_says": {"type": "string", "maxLength": 300}, "still_true": {"type": "boolean"}}}
right = 0
if os.environ.get('NOW') and not os.environ.get('FACTS'):
    schema = {"type": "object", "additionalProperties": False, "required": ["now"], "properties": {"now": {"type": "string", "maxLength": 300}}}
if os.environ.get('FACTS'):
    pairs = pairs3
    schema = {"type": "object", "additionalProperties": False, "required": ["now"], "properties": {"now": {"type": "string", "maxLength": 300}}} if os.environ.get('NOW') else {"type": "object", "additionalProperties": False, "required": ["both_true"], "properties": {"both_true": {"type": "boolean"}}}
for said, note, truth in pairs:
    material = f'Older note: "{note}"\n\nThe user\'s newest message: "{said}"\n'
    if os.environ.get('FACTS'):
        material = f'Older note: "{note}"\nNewer note: "{said}"\n'
    body = {"model": model, "temperature": 0, "messages": [{"role": "system", "content": prompt}, {"role": "user", "content": material}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "change", "strict": True, "schema": schema}}}
    req = urllib.request.Request(url, json.dumps(body).encode(), {'content-type': 'application/json'})
    answer = json.load(urllib.request.urlopen(req))['choices'][0]['message']['content']
    got = json.loads(answer)
    if 'now' in got:
        import re
        words = lambda t: set(re.findall(r"[\w']+", t.lower())) - {'the','a','an','user','user\'s','is','and','now'}
        got = {'still_true': words(note) <= words(got['now']), 'message_says': ''}
    if 'both_true' in got:
        got = {'still_true': got['both_true'], 'message_says': ''}
    ok = got['still_true'] == truth and (truth or got.get('message_says', got.get('words', '')).strip().lower() in said.lower())
    right += ok
    print('ok ' if ok else 'BAD', truth, '|', note, '|', answer)
print(f'{right}/{len(pairs)}')
