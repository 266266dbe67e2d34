#!/usr/bin/env python3
"""One user's import beside another tenant's writes: how long the other tenant waits.

Usage: scripts/bench-import.py N [BASE_URL]  (a running memproxy with the local embedding model and
no keys; docs/reliability.md gives the command that serves one). Prints the import's time and the
median and maximum of the other tenant's write latency while it ran, and each write over 0.4 s.
"""
import json, threading, time, urllib.request, sys
n = int(sys.argv[1])
base = sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:8181"
lines = "".join(json.dumps({"type":"memory","text":f"Imported fact number {i} about the garden and its {i%37} tomato plants.","kind":"fact","sources":[],"created_at_ms":1000,"updated_at_ms":1000,"valid_until_ms":None})+"\n" for i in range(n))
def post(path, body, ctype, tenant):
    req = urllib.request.Request(base+path, data=body.encode(), method="POST", headers={"content-type": ctype, "x-memproxy-tenant": tenant})
    t=time.time(); r=urllib.request.urlopen(req, timeout=600); r.read(); return time.time()-t
done = {}
def run_import():
    done["import"] = post("/memproxy/v1/users/big/import", lines, "application/x-ndjson", "acme")
start=time.time()
t = threading.Thread(target=run_import); t.start()
time.sleep(1.0)
waits = []
k=0
while t.is_alive():
    t0=time.time(); waits.append(post("/memproxy/v1/users/other/memories", json.dumps({"text": f"Other tenant fact {k} {time.time()}."}), "application/json", "globex"))
    k+=1
    if waits[-1] > 0.4: print(f"slow write at {t0-start:.1f} s: {waits[-1]*1e3:.0f} ms")
t.join()
waits.sort()
print(f"import of {n} memories: {done['import']:.1f} s; another tenant's {len(waits)} writes meanwhile: median {waits[len(waits)//2]*1e3:.0f} ms, max {waits[-1]*1e3:.0f} ms")
