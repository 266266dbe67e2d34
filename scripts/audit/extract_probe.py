#!/usr/bin/env python3
"""Sends the extraction prompt for each session of audit conversations to the memory LLM, in
variants, and prints the facts: a side-by-side look at what a prompt change does.
Usage: extract_probe.py URL VARIANT[,VARIANT] FILES..."""
import json, re, sys, urllib.request, datetime, copy
url, variants, files = sys.argv[1], sys.argv[2].split(','), sys.argv[3:]
prompt = open('' + __import__('os').path.dirname(__import__('os').path.abspath(__file__)) + '/../../config/prompts/extract.md').read().split('\n', 1)[1]
schema = {"type": "object", "additionalProperties": False, "required": ["facts"],
  "properties": {"facts": {"type": "array", "maxItems": 12, "items": {
    "type": "object", "additionalProperties": False,
    "required": ["text", "kind", "quote", "said_as", "about", "replaces"],
    "properties": {
      "text": {"type": "string", "minLength": 10, "maxLength": 300},
      "kind": {"type": "string", "enum": ["fact", "preference", "event", "commitment"]},
      "quote": {"type": "string", "minLength": 2, "maxLength": 300},
      "said_as": {"type": "string", "enum": ["statement", "question", "request"]},
      "about": {"type": "string", "minLength": 2, "maxLength": 60},
      "replaces": {"type": "string", "maxLength": 300}}}}}}
def variant(name):
    p, s = prompt, copy.deepcopy(schema)
    if name == 'noreplace':
        p = re.sub(r'\nStored memories about this user.*?into "replaces".\n', '\n', p, flags=re.S)
        p = p.replace(' and "replaces" (the text of the stored memory it makes no longer true, copied, or "" when\nnone)', '')
        p = re.sub(r'For example, with the stored memories\n.*?\nand the new message', 'For example, for the new message', p, flags=re.S)
        p = p.replace(',\n  "replaces": "The user lives in Lisbon."}', '}').replace(', "replaces": ""}', '}')
        s['properties']['facts']['items']['required'].remove('replaces')
        del s['properties']['facts']['items']['properties']['replaces']
    return p, s
def ask(system, user, s):
    body = {"model": "", "temperature": 0, "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "facts", "strict": True, "schema": s}}}
    req = urllib.request.Request(url + '/chat/completions', json.dumps(body).encode(), {'content-type': 'application/json'})
    out = json.load(urllib.request.urlopen(req, timeout=600))['choices'][0]['message']['content']
    try: return json.loads(out)['facts']
    except Exception: return [{'text': 'UNPARSED ' + out[:200]}]
for v in variants:
    system, s = variant(v)
    if v == 'noreplace': assert 'replaces' not in system, system
    total = 0
    copies = 0
    for f in files:
        d = json.load(open(f))
        stored = []
        for i, sess in enumerate(d['sessions']):
            day = datetime.datetime.fromisoformat(sess['date'].replace('Z', '+00:00'))
            lines = [f"[{day:%Y-%m-%d} {day:%A}] {k}: {t}" for turn in sess['turns'] for k, t in turn.items()]
            material = f"Date of the newest message: {day:%Y-%m-%d} {day:%A}\n\nStored memories:\n" + ("\n".join(f'- "{m}"' for m in stored) if stored and v != 'noreplace' else "(none)") + "\n\nEarlier context (for reference only):\n(none)\n\nNew messages:\n" + "\n".join(lines) + "\n"
            facts = ask(system, material, s); total += len(facts)
            shown = set(stored) if v != 'noreplace' else set()
            copies += sum(1 for x in facts if x.get('text') in shown)
            stored += [x.get('text') for x in facts if x.get('text') not in stored]
            print(f"[{v}] {d['id']} s{i+1}: {len(facts)} facts")
            for x in facts: print('    -', x.get('text'), '| about', x.get('about'), '| replaces', repr(x.get('replaces', '')))
    print(f"[{v}] total facts {total}, copies of a shown memory {copies}")
