"""Things for the contract run to act on (scripts/schemathesis.sh): without them every
operation on /libraries/{id}, /jobs/{id}, /connections/{id}, /notifications/{id}, /nodes/{id}
and a library's health files meets nothing but 404 or 409 (schemathesis's "missing test
data"), and never reaches the code behind it.

Made through the API, as a user would: a library over a folder holding short clips (QUEUED
jobs: the server runs with no job slots; one of them paused, for resume) and an HEVC clip
(SKIPPED by the probe, for force) and a file that is not media (one finding of a quick
health check), a second library, notification and connection of each kind for the DELETE
operations to remove (the kept connection is the Radarr of radarr.py, which holds the
library's files), two linked nodes enrolled and stopped (one to remove, one to revoke), and
empty folders that a new library may take. Prints the settings that bind the operations'
ids (and the new library's paths, and the licence) to these in most cases (BOUND): the
others stay as schemathesis generates them.

Usage: seed.py BASE_URL TOKEN ROOT (a folder of the run's own; the clips are made with the
system's ffmpeg). From the environment: CONDENSE_BIN (started as the linked nodes),
CLUSTER_TOKEN, LICENSE_KEY (the main node's), RADARR_URL.
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


def clip(name, *encode):
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5", "-t", "1", *encode,
                    os.path.join(kept, name)], check=True)


# Jobs for the operations on jobs: half for those that end or change any job, half for
# pause and resume alone, and one paused before the run for POST /jobs/{id}/resume.
CLIPS = 8
for n in range(CLIPS):
    clip(f"clip-{n}.mkv", "-c:v", "libx264")
# HEVC already: the probe after the scan skips it (SKIPPED), what POST /jobs/{id}/force takes.
clip("hevc.mkv", "-c:v", "libx265", "-x265-params", "log-level=error")
with open(os.path.join(kept, "notes.mkv"), "wb") as notes:
    notes.write(b"not a video")

# The kept one of each kind is made first and the expendable one second (ids 1 and 2): the
# coverage phase takes no bound values, and its DELETE goes to /…/2.
library = call("POST", "/libraries", {"name": "contract", "paths": [kept]})["id"]
expendable = call("POST", "/libraries", {"name": "contract-expendable", "paths": [folder("media", "expendable")]})["id"]
call("POST", f"/libraries/{library}/scan")


def statuses():
    listed = call("GET", "/jobs")["items"]
    return len(listed) == CLIPS + 2 and all(j["status"] in ("QUEUED", "SKIPPED") for j in listed) and listed


# The clips' and the one of the file that is not media (QUEUED too: only an encode reads it
# whole), and the HEVC one skipped.
listed = until("the clips' jobs", statuses)
skipped = [j["id"] for j in listed if j["status"] == "SKIPPED"]
queued = sorted(j["id"] for j in listed if j["status"] == "QUEUED")
if len(skipped) != 1:
    sys.exit(f"seed: expected the HEVC clip SKIPPED, the jobs are {listed}")
paused = queued.pop()
call("POST", f"/jobs/{paused}/pause")
# Half the queued jobs for the operations that end a job (cancel) or act on any, half for
# pause and resume, which the others leave QUEUED for them.
jobs, pausable = queued[: len(queued) // 2], queued[len(queued) // 2:]
call("POST", f"/libraries/{library}/health", {"depth": "quick"})


def health_files():
    health = call("GET", f"/libraries/{library}/health")
    done = health["run"] and health["run"]["status"] == "DONE"
    return done and [f["id"] for f in health["files"]]


files = until("the health check", health_files)


def notification(name):
    body = {"name": name, "kind": "webhook", "url": "http://127.0.0.1:9/hook", "events": ["job.completed"]}
    return call("POST", "/notifications", body)["id"]


def connection(name, kind, url):
    body = {"name": name, "kind": kind, "url": url, "apiKey": "contract-key", "pathMappings": []}
    return call("POST", "/connections", body)["id"]


def linked_nodes(names):
    """Linked nodes named `names`, enrolled with the run's cluster token and stopped again:
    their records stay, OFFLINE, for DELETE /nodes/{id} and POST /nodes/{id}/revoke (a
    linked node's, never the main node's). No job slots: they take none of the seeded jobs."""
    started = []
    try:
        for name in names:
            env = {"PATH": os.environ["PATH"], "HOME": root, "DATA_DIR": folder("nodes", name), "BIND": "127.0.0.1",
                   "PORT": "0", "UI_PORT": "0", "ROLE": "linked", "MAIN_NODE_URL": base, "NODE_NAME": name,
                   "CLUSTER_TOKEN": os.environ["CLUSTER_TOKEN"], "MAX_JOBS": "0", "NO_COLOR": "1"}
            with open(os.path.join(root, f"{name}.log"), "wb") as log:
                started.append(subprocess.Popen([os.environ["CONDENSE_BIN"], "serve"], env=env, stdout=log,
                                                stderr=log))

        def enrolled():
            found = {n["name"]: n["id"] for n in call("GET", "/nodes") if n["name"] in names}
            return len(found) == len(names) and found

        listed = until("the linked nodes", enrolled)
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(30)
    return [listed[name] for name in names]


removable, revocable = linked_nodes(["contract-removable", "contract-revocable"])
nodes = [n["id"] for n in call("GET", "/nodes")]
free = [folder("media", f"free-{n}") for n in range(8)]

dictionaries = {
    "library": [library], "expendable-library": [expendable],
    "job": jobs, "skipped-job": skipped, "pausable-job": pausable, "paused-job": [paused, *pausable],
    "health-file": files, "node": nodes,
    "removable-node": [removable], "revocable-node": [revocable],
    "notification": [notification("contract")], "expendable-notification": [notification("contract-expendable")],
    # The kept one is the Radarr of radarr.py, which holds the kept library's files.
    "connection": [connection("contract", "radarr", os.environ["RADARR_URL"])],
    "expendable-connection": [connection("contract-expendable", "sonarr", "http://127.0.0.1:9/sonarr")],
    "changeable-connection": [connection("contract-changeable", "sonarr", "http://127.0.0.1:9/sonarr")],
    "license-key": [os.environ["LICENSE_KEY"]],
    "free-folder": free,
}
print("\n# Made by scripts/schemathesis/seed.py for this run.")
for name, values in dictionaries.items():
    print(f"\n[dictionaries.{name}]\nvalues = {json.dumps(values)}")


def bind(where, parameter, dictionary, probability=BOUND):
    print(f"\n[[operations]]\n{where}")
    print(f'parameters = {{ "{parameter}" = {{ dictionary = "{dictionary}", probability = {probability} }} }}')


# DELETE /libraries/{id} and /notifications/{id} remove what they are given: they get the
# expendable one, the rest the kept one (a library's health check and forecast, cancelled
# by DELETE, are the kept library's).
for path, name in [("libraries", "library"), ("notifications", "notification")]:
    bind(f'include-path-regex = "^/{path}/\\\\{{id\\\\}}"\nexclude-name = "DELETE /{path}/{{id}}"', "path.id", name)
    bind(f'include-name = "DELETE /{path}/{{id}}"', "path.id", f"expendable-{name}", 1.0)
# The kept connection is what "get a new copy" asks: reading and testing it leave it as it
# is; changes and removals go to the other one, always (a made-up id might be the kept one's).
under = 'include-path-regex = "^/connections/\\\\{id\\\\}"'
bind(f'{under}\nexclude-method = ["PUT", "DELETE"]', "path.id", "connection")
bind(f'{under}\ninclude-method = "PUT"', "path.id", "changeable-connection", 1.0)
bind(f'{under}\ninclude-method = "DELETE"', "path.id", "expendable-connection", 1.0)
bind('include-path-regex = "^/libraries/\\\\{id\\\\}/health/files/"', "path.fileId", "health-file")
# Force takes a SKIPPED (or COMPLETED) job, resume a PAUSED one (the seeded one, or one
# that pause paused): they get their own, which the other operations on jobs never reach (a
# made-up id might be theirs).
own = ["POST /jobs/{id}/force", "POST /jobs/{id}/pause", "POST /jobs/{id}/resume"]
bind(f'include-path-regex = "^/jobs/\\\\{{id\\\\}}"\nexclude-name = {json.dumps(own)}', "path.id", "job", 1.0)
bind('include-name = "POST /jobs/{id}/force"', "path.id", "skipped-job")
bind('include-name = "POST /jobs/{id}/pause"', "path.id", "pausable-job", 1.0)
bind('include-name = "POST /jobs/{id}/resume"', "path.id", "paused-job")
bind('include-path-regex = "^/nodes/\\\\{id\\\\}"\nexclude-name = ["DELETE /nodes/{id}", "POST /nodes/{id}/revoke"]',
     "path.id", "node")
bind('include-name = "DELETE /nodes/{id}"', "path.id", "removable-node")
bind('include-name = "POST /nodes/{id}/revoke"', "path.id", "revocable-node")
bind('include-name = "POST /libraries"', "body.paths[*]", "free-folder")
# The run's own licence (a PRO key of this run's key pair): any other key is refused.
bind('include-name = "PUT /license"', "body.key", "license-key")
