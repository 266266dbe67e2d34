#!/usr/bin/env python3
"""Lists a kept eval run's memories per conversation, with the hand labels of
examples/audit/labels.jsonl applied ([?] = no label yet). Usage: label.py RUN_DIR [--turns]"""
import json, re, sqlite3, sys, glob, os
run = sys.argv[1]; turns = '--turns' in sys.argv
root = '' + __import__('os').path.dirname(__import__('os').path.abspath(__file__)) + '/../../examples/audit'
def norm(t):
    w = re.sub(r'[^\w\s]', ' ', t.lower()).split()
    return ' '.join(x for x in w if x not in ('a', 'an', 'the'))
labels = {}
for l in open(f'{root}/labels.jsonl'):
    j = json.loads(l); labels[(j['conversation'], norm(j['memory']))] = j['label']
convs = {}
for f in glob.glob(f'{root}/*/*.json'):
    d = json.load(open(f)); convs[d['id']] = d
tot = {}; 
for d in sorted(glob.glob(f'{run}/data/*')):
    cid = os.path.basename(d).rsplit('-', 1)[0]
    db = sqlite3.connect(f'{d}/memproxy.db')
    rows = list(db.execute('select id, coalesce(subject,"-"), valid_until is null, text from memories order by id'))
    print(f'== {cid}')
    if turns:
        for s in convs[cid]['sessions']:
            for t in s['turns']:
                for k, v in t.items(): print(f'   {k}: {v}')
    for i, subj, live, text in rows:
        lab = labels.get((cid, norm(text)), '?')
        if live: tot[lab] = tot.get(lab, 0) + 1
        print(f"  {'LIVE' if live else 'old '} [{lab}] ({subj}) {text}")
n = sum(tot.values()); wrong = n - tot.get('correct', 0) - tot.get('?', 0)
print('live:', n, tot, f"wrong {wrong}/{n - tot.get('?',0)} labelled")
