#!/usr/bin/env python3
"""Replays the change check (src/postprocess/changed.rs: config/prompts/changed.md, then
config/prompts/both-true.md) on hand-made pairs from the TUNING conversations only, against an
OpenAI-compatible URL, and prints each question's answer and the decision.
Usage: change_probe.py URL [MODEL] [--message]. With --message, the check as asked of a user's
message itself (the message stands as the newer note; MESSAGE_PAIRS).
(Words are compared unstemmed here; the Rust check stems.)"""
import json, os, re, sys, urllib.request

url = sys.argv[1].rstrip('/') + '/chat/completions'
model = sys.argv[2] if len(sys.argv) > 2 else 'qwen'
root = os.path.dirname(os.path.abspath(__file__)) + '/../..'
CHANGED = open(f'{root}/config/prompts/changed.md').read()
BOTH = open(f'{root}/config/prompts/both-true.md').read()

# (the user's message, the new fact drawn from it, an older note, is the older note still true?)
PAIRS = [
    ("I finally moved out! I now share a flat in Grenoble with my friend Amélie, she's a nurse at the university hospital.",
     "The user now shares a flat in Grenoble with Amélie.", "The user lives in a tiny studio in Lyon.", False),
    ("I took the job! I'm now sous-chef at the bistro. First week was chaos.",
     "The user took the job as sous-chef at the bistro.", "The user works as a line cook at a hotel in Porto.", False),
    ("Change of plan: I hurt my knee, so I'm doing the 10 km race in October instead of the half marathon.",
     "The user is doing the 10 km race in October instead of the half marathon.", "The user wants to run their first half marathon in October.", False),
    ("Change of plan: I hurt my knee, so I'm doing the 10 km race in October instead of the half marathon.",
     "The user is doing the 10 km race in October instead of the half marathon.", "The user can run about 5 km.", True),
    ("Biscuit finished the drops and he's fine now. He's also on a new grain-free food.",
     "The user's dog Biscuit is fine now.", "The user's dog Biscuit is scratching his ears.", False),
    ("Biscuit finished the drops and he's fine now. He's also on a new grain-free food.",
     "The user's dog Biscuit is fine now.", "The user's dog Biscuit is a 6-year-old beagle.", True),
    ("Big change: I watched a documentary and I've stopped eating meat. I still eat fish though.",
     "The user has stopped eating meat but still eats fish.", "The user loves a good steak.", False),
    ("I'm hosting my sister Lotte on Friday, she's vegan. What could I cook that we both eat?",
     "The user's sister Lotte is vegan.", "The user has stopped eating meat but still eats fish.", True),
    ("I finally moved out! I now share a flat in Grenoble with my friend Amélie, she's a nurse at the university hospital.",
     "The user now shares a flat in Grenoble with Amélie.", "The user's friend Amélie is a nurse.", True),
    ("The head chef is Marco Bellini, he trained in Lyon. The pay is 20% more.",
     "The pay is 20% more.", "The user works as a line cook at a hotel in Porto.", True),
    ("I took the job! I'm now sous-chef at the bistro. First week was chaos.",
     "The user took the job as sous-chef at the bistro.", "The head chef is Marco Bellini, he trained in Lyon.", True),
    ("Love it, mountains everywhere. Can you recommend a beginner ski area nearby?",
     "The user loves Grenoble, mountains everywhere.", "The user now shares a flat in Grenoble with Amélie.", True),
]
# (the user's message, an older note, is the older note still true?): the message check.
MESSAGE_PAIRS = [
    ("Biscuit finished the drops and he's fine now. He's also on a new grain-free food.",
     "The user's dog Biscuit has a yeast infection.", False),
    ("Biscuit finished the drops and he's fine now. He's also on a new grain-free food.",
     "Biscuit keeps scratching his ears.", False),
    ("Biscuit finished the drops and he's fine now. He's also on a new grain-free food.",
     "The user's dog Biscuit is a 6-year-old beagle.", True),
    ("I finally moved out! I now share a flat in Grenoble with my friend Amélie, she's a nurse at the university hospital.",
     "The user lives in a tiny studio in Lyon.", False),
    ("The lunch went well! Bram brought his own snacks just in case. Can you help me write a thank-you message to the team?",
     "The user is organising the team lunch.", False),
    ("The lunch went well! Bram brought his own snacks just in case. Can you help me write a thank-you message to the team?",
     "The user's colleague Bram is allergic to peanuts and Sofie doesn't eat gluten.", True),
    ("Yusuf gets seasick so no boats. Let's do York, the railway museum sounds fun.",
     "The user and Yusuf live in Leeds and doesn't have a car.", True),
    ("We're on the train to York now! What time does the railway museum open?",
     "The user and Yusuf have a free weekend at the end of April.", True),
    ("Change of plan: I hurt my knee, so I'm doing the 10 km race in October instead of the half marathon.",
     "The user wants to run their first half marathon in October.", False),
    ("Change of plan: I hurt my knee, so I'm doing the 10 km race in October instead of the half marathon.",
     "The user can run about 5 km.", True),
    ("Quick update: Dorota moved our lessons from Tuesday to Thursday evenings.",
     "The user's teacher is Dorota Sikorska, 71 years old, still plays in a quartet.", True),
    ("About eight months. Dorota says my bow arm is too stiff.",
     "The user is Ines, 34 years old, learning the cello.", True),
]
if '--message' in sys.argv:
    sys.argv.remove('--message')
    model = sys.argv[2] if len(sys.argv) > 2 else 'qwen'
    PAIRS = [(told, told, old, truth) for told, old, truth in MESSAGE_PAIRS]
STOP = {'the', 'a', 'an', 'is', 'and', 'of', 'in', 'at', 'to', 'user', "user's", 'now'}


def ask(system, material, schema):
    body = {"model": model, "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": material}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": schema}}}
    request = urllib.request.Request(url, json.dumps(body).encode(), {'content-type': 'application/json'})
    return json.loads(json.load(urllib.request.urlopen(request))['choices'][0]['message']['content'])


def words(text):
    return set(re.findall(r"[\w']+", text.lower())) - STOP


right = 0
for told, fact, old, truth in PAIRS:
    now = ask(CHANGED, f'Older note: {json.dumps(old)}\n\nThe user\'s newest message: {json.dumps(told)}\n',
              {"type": "object", "additionalProperties": False, "required": ["now"],
               "properties": {"now": {"type": "string", "maxLength": 400}}})["now"]
    echo = bool(words(now)) and words(now) <= words(told) and len(words(now)) >= 0.8 * len(words(told))
    loses = bool(now.strip()) and not echo and not words(old) <= words(now)
    both = None
    if loses:
        both = ask(BOTH, f'Older note: {json.dumps(old)}\nNewer note: {json.dumps(fact)}\n',
                   {"type": "object", "additionalProperties": False, "required": ["both_true"],
                    "properties": {"both_true": {"type": "boolean"}}})["both_true"]
    still = not (loses and both is False)
    right += still == truth
    print('ok ' if still == truth else 'BAD', 'true ' if truth else 'stale', '|', old, '| now:', now, '| both_true:', both)
print(f'{right}/{len(PAIRS)} decided as a person would')
