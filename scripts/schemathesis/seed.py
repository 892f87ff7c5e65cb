"""Things for the contract run to act on (scripts/schemathesis.sh): without them every
operation on /libraries/{id}, /jobs/{id}, /connections/{id}, /notifications/{id}, /nodes/{id}
and a library's health files meets nothing but 404 (schemathesis's "missing test data"), and
never reaches the code behind it.

Made through the API, as a user would: a library over a folder holding short clips (three
QUEUED jobs: the server runs with no job slots) and a file that is not media (one finding of
a quick health check), a second library, notification and connection of each kind for the
DELETE operations to remove, and empty folders that a new library may take. Prints the
settings that bind the operations' ids (and the new library's paths) to these in most
cases (BOUND): the others stay as schemathesis generates them.

Usage: seed.py BASE_URL TOKEN ROOT (a folder of the run's own; the clips are made with the
system's ffmpeg).
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

base, token, root = sys.argv[1:]
# The share of cases given a seeded value: made-up ids mostly test the 404 alone.
BOUND = 0.8


def call(method, path, body=None, expect=(200, 201, 202)):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data, method=method,
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            status, answer = response.status, response.read()
    except urllib.error.HTTPError as refused:
        status, answer = refused.code, refused.read()
    if status not in expect:
        sys.exit(f"seed: {method} {path} answered {status}: {answer.decode(errors='replace')}")
    return json.loads(answer) if answer else None


def until(what, probe, seconds=120):
    deadline = time.monotonic() + seconds
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            sys.exit(f"seed: {what} never came")
        time.sleep(0.2)


def folder(*parts):
    path = os.path.join(root, *parts)
    os.makedirs(path, exist_ok=True)
    return path


kept = folder("media", "kept")
# Three jobs: one cancelled early in the run still leaves others QUEUED.
for n in range(3):
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5", "-t", "1",
                    "-c:v", "libx264", os.path.join(kept, f"clip-{n}.mkv")], check=True)
with open(os.path.join(kept, "notes.mkv"), "wb") as notes:
    notes.write(b"not a video")

library = call("POST", "/libraries", {"name": "contract", "paths": [kept]})["id"]
expendable = call("POST", "/libraries", {"name": "contract-expendable", "paths": [folder("media", "expendable")]})["id"]
call("POST", f"/libraries/{library}/scan")
until("the clips' jobs", lambda: sum(j["status"] == "QUEUED" for j in call("GET", "/jobs")["items"]) >= 3)
# With the one of the file that is not media (QUEUED too: only an encode reads it whole).
jobs = [j["id"] for j in call("GET", "/jobs")["items"]]
call("POST", f"/libraries/{library}/health", {"depth": "quick"})


def health_files():
    health = call("GET", f"/libraries/{library}/health")
    done = health["run"] and health["run"]["status"] == "DONE"
    return done and [f["id"] for f in health["files"]]


files = until("the health check", health_files)


def notification(name):
    body = {"name": name, "kind": "webhook", "url": "http://127.0.0.1:9/hook", "events": ["job.completed"]}
    return call("POST", "/notifications", body)["id"]


def connection(name):
    body = {"name": name, "kind": "sonarr", "url": "http://127.0.0.1:9/sonarr", "apiKey": "contract-key",
            "pathMappings": []}
    return call("POST", "/connections", body)["id"]


nodes = [n["id"] for n in call("GET", "/nodes")]
free = [folder("media", f"free-{n}") for n in range(8)]

dictionaries = {
    "library": [library], "expendable-library": [expendable],
    "job": jobs, "health-file": files, "node": nodes,
    "notification": [notification("contract")], "expendable-notification": [notification("contract-expendable")],
    "connection": [connection("contract")], "expendable-connection": [connection("contract-expendable")],
    "free-folder": free,
}
print("\n# Made by scripts/schemathesis/seed.py for this run.")
for name, values in dictionaries.items():
    print(f"\n[dictionaries.{name}]\nvalues = {json.dumps(values)}")


def bind(where, parameter, dictionary):
    print(f"\n[[operations]]\n{where}")
    print(f'parameters = {{ "{parameter}" = {{ dictionary = "{dictionary}", probability = {BOUND} }} }}')


# A DELETE removes (or resets) what it is given: it gets the expendable one, the rest the
# kept one.
for path, name in [("libraries", "library"), ("notifications", "notification"), ("connections", "connection")]:
    under = f'include-path-regex = "^/{path}/\\\\{{id\\\\}}"'
    bind(f'{under}\nexclude-method = "DELETE"', "path.id", name)
    bind(f'{under}\ninclude-method = "DELETE"', "path.id", f"expendable-{name}")
bind('include-path-regex = "^/libraries/\\\\{id\\\\}/health/files/"', "path.fileId", "health-file")
bind('include-path-regex = "^/jobs/\\\\{id\\\\}"', "path.id", "job")
bind('include-path-regex = "^/nodes/\\\\{id\\\\}"', "path.id", "node")
bind('include-name = "POST /libraries"', "body.paths[*]", "free-folder")
