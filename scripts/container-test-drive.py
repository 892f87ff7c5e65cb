#!/usr/bin/env python3
"""Drives the container deployment from outside, as a user would: HTTP and WebSocket only.

Called by scripts/container-test.sh, which builds the images, brings the compose stack up and
down, and cleans up. Each phase prints one line per check ("ok   ..."); the first failure
prints "FAIL ..." and exits 1.

  before: sign in, both linked nodes up (ONLINE, or DEGRADED by the load alone), each
          linked node's API port answering the main node's API (asked from inside its
          container: the workers publish no port), the
          dashboard served, a library on the shared
          volume, every clip encoded (some by the linked nodes), nginx in front (/api, /ws);
          writes what it saw to the state file
  after:  (after `down` and `up`) the same jobs in the same states, the encoded files
          untouched, the linked nodes back, a rescan that queues nothing

Environment: API_URL, UI_URL, PROXY_URL (http://127.0.0.1:PORT), ADMIN_PASSWORD, MEDIA_DIR
(the host folder mounted at /media), STATE_FILE.
"""

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from websockets.sync.client import connect as ws_connect

API = os.environ["API_URL"]
UI = os.environ["UI_URL"]
PROXY = os.environ["PROXY_URL"]
PASSWORD = os.environ["ADMIN_PASSWORD"]
MEDIA_DIR = os.environ["MEDIA_DIR"]
STATE_FILE = os.environ["STATE_FILE"]
PROJECT = os.environ.get("COMPOSE_PROJECT", "condense-container-test")
CLIPS = "clips"  # the library's folder under MEDIA_DIR, /media/clips in the containers
LINKED = ("worker1", "worker2")  # worker2 links through nginx (docker/test/compose.test.yaml)
ENDED = {"COMPLETED", "FAILED", "SKIPPED", "CANCELLED"}


def ok(what):
    print(f"ok   {what}", flush=True)


def fail(what):
    print(f"FAIL {what}", flush=True)
    sys.exit(1)


def request(method, url, token=None, body=None, timeout=30):
    """(status, headers, body bytes); HTTP errors are answers too."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as answer:
            return answer.status, answer.headers, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def api(method, path, token, body=None, base=None, want=200):
    status, _, raw = request(method, (base or API) + path, token, body)
    if status != want:
        fail(f"{method} {path}: wanted {want}, got {status}: {raw[:300]!r}")
    return json.loads(raw) if raw else None


def wait_for(what, check, timeout, every=2.0):
    """Polls check() until it returns something truthy; fails with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (OSError, urllib.error.URLError) as e:
            last = e
        else:
            if last and not isinstance(last, Exception):
                return last
        time.sleep(every)
    fail(f"{what} (after {timeout} s; last: {str(last)[:300]})")


def login(base=API):
    status, _, raw = request("POST", base + "/auth/login", body={"username": "admin", "password": PASSWORD})
    if status != 200:
        fail(f"sign in as admin at {base}: {status} {raw[:200]!r}")
    return json.loads(raw)["token"]


def is_up(node):
    """ONLINE, or DEGRADED for the load alone (src/domain/node.rs): a container reads the
    host's load average, and the machines this runs on are shared with other builds (a load
    of 10 on 2 cores made every node DEGRADED). Any other cause (errors, a library path the
    node cannot see) still fails."""
    causes = (node.get("statusReason") or "").split("; ")
    return node.get("status") == "ONLINE" or (
        node.get("status") == "DEGRADED" and all(c.startswith("load ") for c in causes))


def nodes_online(token, names):
    nodes = {n["name"]: n for n in api("GET", "/nodes", token)}
    missing = [n for n in names if not is_up(nodes.get(n, {}))]
    return nodes if not missing else None


def jobs_of(token, library_id):
    page = api("GET", f"/jobs?libraryId={library_id}&pageSize=500&sort=fileName&order=asc", token)
    return page["items"]


def codec_of(path):
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name",
         "-of", "csv=p=0", path],
        capture_output=True, text=True, check=False)
    return out.stdout.strip()


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def media_files():
    """{name: path} of the library's visible files on the host (condense's hidden files skipped)."""
    folder = os.path.join(MEDIA_DIR, CLIPS)
    return {n: os.path.join(folder, n) for n in sorted(os.listdir(folder)) if not n.startswith(".")}


def dashboard_served(base, where):
    status, headers, raw = request("GET", base + "/")
    html = raw.decode(errors="replace")
    if status != 200 or "text/html" not in headers.get("Content-Type", ""):
        fail(f"GET / {where}: {status} {headers.get('Content-Type')}")
    if '<div id="app">' not in html or "/assets/" not in html or "has not been built" in html:
        fail(f"GET / {where} is not the built dashboard: {html[:200]!r}")
    ok(f"GET / {where} serves the built dashboard (index.html with its /assets/ scripts)")


class Feed:
    """The live feed through the proxy, read on a thread while the jobs run."""

    def __init__(self, token):
        url = PROXY.replace("http://", "ws://") + f"/ws?token={token}"
        self.ws = ws_connect(url, open_timeout=15, close_timeout=5)
        self.status_code = self.ws.response.status_code
        self.messages = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for text in self.ws:
                self.messages.append(json.loads(text))
        except Exception:  # closed: the test reads what came before
            pass

    def close(self):
        self.ws.close()
        self.thread.join(timeout=10)


def via_linked_node(service, path, token):
    """(status, body) of GET `path` asked of a linked node's own API port, from inside its
    container (the workers publish no port): bash's /dev/tcp, as the image's health check."""
    name = subprocess.run(
        ["podman", "ps", "--filter", f"label=com.docker.compose.service={service}",
         "--filter", f"label=io.podman.compose.project={PROJECT}", "--format", "{{.Names}}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    if not name:
        fail(f"no running container for {service}")
    script = ('exec 3<>/dev/tcp/127.0.0.1/3100 && printf "GET %s HTTP/1.0\\r\\nHost: localhost\\r\\n'
              'Authorization: Bearer %s\\r\\n\\r\\n" "$0" "$1" >&3 && cat <&3')
    out = subprocess.run(["podman", "exec", name[0], "bash", "-c", script, path, token],
                         capture_output=True, timeout=60).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
    return status, body


def before():
    token = login()
    ok("POST /auth/login as admin (ADMIN_PASSWORD from the environment)")

    # Without a token /healthz tells the status alone (src/http/health.rs); the role, node
    # and database are told to a token's holder.
    health = api("GET", "/healthz", token)
    if health.get("database") != "postgres" or health.get("role") != "main":
        fail(f"/healthz: wanted the main node on PostgreSQL: {health}")
    ok(f"GET /healthz: role {health.get('role')}, node {health.get('node')}, database {health.get('database')}")

    license_ = api("GET", "/license", token)
    if license_.get("effectiveTier") != "PRO":
        fail(f"the licence from LICENSE_KEY is not in force: {license_}")
    ok("licence key made at run time (condense license keygen / issue) in force: PRO")

    nodes = wait_for("main, worker1 and worker2 up in /nodes", lambda: nodes_online(token, ("main", *LINKED)), 120)
    ok("GET /nodes: main, worker1 and worker2 up, ONLINE or DEGRADED by the load alone (" +
       ", ".join(f"{n}: {nodes[n]['role']}, {nodes[n]['status']}" for n in ("main", *LINKED)) + ")")

    # A linked node's API port answers with the main node's API, also for worker2, whose
    # MAIN_NODE_URL is nginx (which sends only /api/, /ws and /cluster/link to the API).
    for service in LINKED:
        status, body = via_linked_node(service, "/jobs?pageSize=1", token)
        try:
            listed = json.loads(body)
        except ValueError:  # the dashboard's page, say
            listed = None
        if status != 200 or not isinstance(listed, dict) or "total" not in listed:
            fail(f"GET /jobs on {service}'s API port: {status} {body[:200]!r}")
    ok("GET /jobs on each linked node's API port answers the main node's job list (worker2 through nginx)")

    dashboard_served(UI, "on the web interface port")
    dashboard_served(PROXY, "through nginx")

    # The API through the proxy answers what the API port answers.
    via_proxy = api("GET", "/api/nodes", token, base=PROXY)
    if sorted(n["name"] for n in via_proxy) != sorted(nodes):
        fail(f"/api/nodes through nginx differs: {via_proxy}")
    status, _, _ = request("GET", PROXY + "/api/nodes")
    if status != 401:
        fail(f"/api/nodes through nginx without a token: wanted 401, got {status}")
    ok("nginx /api/: GET /api/nodes answers the API's list with a token, 401 without")

    feed = Feed(token)
    if feed.status_code != 101:
        fail(f"WebSocket /ws through nginx: status {feed.status_code}")
    ok("nginx /ws: WebSocket handshake upgraded (101 Switching Protocols)")

    library = api("POST", "/libraries", token, want=201, body={
        "name": "container-test", "paths": [f"/media/{CLIPS}"], "encoder": "libx265",
        "preset": "ultrafast", "watch": False,
    })
    sources = media_files()
    ok(f"POST /libraries: a library on the shared volume, /media/{CLIPS} ({len(sources)} H.264 clips)")

    def all_ended():
        jobs = jobs_of(token, library["id"])
        return jobs if len(jobs) == len(sources) and all(j["status"] in ENDED for j in jobs) else None

    jobs = wait_for("every clip's job ended", all_ended, 600, every=3)
    not_completed = [(j["fileName"], j["status"], j.get("failureReason")) for j in jobs if j["status"] != "COMPLETED"]
    if not_completed:
        fail(f"jobs not COMPLETED: {not_completed}")
    ok(f"all {len(jobs)} jobs COMPLETED")

    per_node = {}
    for j in jobs:
        per_node.setdefault(j["node"], []).append(j["fileName"])
    if not any(n in per_node for n in LINKED):
        fail(f"no job ran on a linked node: {per_node}")
    summary = ", ".join(f"{n}: {len(f)}" for n, f in sorted(per_node.items(), key=lambda kv: str(kv[0])))
    ok(f"jobs ran on the linked nodes (the API's job.node: {summary})")
    if "worker2" not in per_node:
        # Not fatal: the scheduler owes no node a job; worker2 being ONLINE proves its link.
        print("note worker2 (linked through nginx) ran none of these jobs", flush=True)

    files = media_files()
    for j in jobs:
        path = files.get(j["fileName"])
        if path is None:
            fail(f"{j['fileName']} is gone from the shared volume")
        if codec_of(path) != "hevc":
            fail(f"{j['fileName']} on the host is {codec_of(path)!r}, not hevc")
        if os.path.getsize(path) != j["outputSize"]:
            fail(f"{j['fileName']}: {os.path.getsize(path)} bytes on the host, outputSize {j['outputSize']}")
    ok("every file on the shared volume is now HEVC, of the size the API reports (ffprobe on the host)")

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(m.get("type") == "status" for m in feed.messages):
        time.sleep(0.5)
    feed.close()
    completed = {m.get("jobId") for m in feed.messages if m.get("type") == "status" and m.get("status") == "COMPLETED"}
    if not completed:
        fail(f"no COMPLETED status message on /ws through nginx ({len(feed.messages)} messages)")
    ok(f"nginx /ws: {len(feed.messages)} live messages, COMPLETED for {len(completed)} of {len(jobs)} jobs")

    state = {
        "libraryId": library["id"],
        "nodes": {n: nodes[n]["id"] for n in LINKED},
        "jobs": {str(j["id"]): {k: j[k] for k in ("fileName", "status", "node", "outputSize")} for j in jobs},
        "files": {name: sha256_of(path) for name, path in files.items()},
    }
    with open(STATE_FILE, "w") as f:
        json.dump(state, f, indent=1)


def after():
    with open(STATE_FILE) as f:
        state = json.load(f)
    token = login()
    ok("POST /auth/login again after down and up (same database)")

    jobs = {str(j["id"]): {k: j[k] for k in ("fileName", "status", "node", "outputSize")}
            for j in jobs_of(token, state["libraryId"])}
    if jobs != state["jobs"]:
        fail(f"jobs changed across down/up:\nbefore {state['jobs']}\nafter  {jobs}")
    ok(f"the same {len(jobs)} jobs, each with its status, node and output size")

    files = {name: sha256_of(path) for name, path in media_files().items()}
    if files != state["files"]:
        fail(f"files on the shared volume changed across down/up: {state['files']} -> {files}")
    ok("the encoded files are byte for byte those from before (SHA-256)")

    nodes = wait_for("worker1 and worker2 ONLINE again", lambda: nodes_online(token, LINKED), 120)
    ids = {n: nodes[n]["id"] for n in LINKED}
    if ids != state["nodes"]:
        fail(f"the linked nodes came back as other nodes: {state['nodes']} -> {ids}")
    ok(f"worker1 and worker2 ONLINE again as the same nodes (ids {ids['worker1']} and {ids['worker2']})")

    scan = api("POST", f"/libraries/{state['libraryId']}/scan", token)
    if scan.get("queued") != 0 or scan.get("removed") != 0:
        fail(f"a rescan after down/up changed jobs: {scan}")
    time.sleep(3)
    jobs = {str(j["id"]): j["status"] for j in jobs_of(token, state["libraryId"])}
    if set(jobs.values()) != {"COMPLETED"}:
        fail(f"jobs not all COMPLETED after the rescan: {jobs}")
    ok(f"POST /libraries/{{id}}/scan: {scan['found']} found, 0 queued, 0 removed; all still COMPLETED")

    dashboard_served(UI, "on the web interface port after down and up")


if __name__ == "__main__":
    {"before": before, "after": after}[sys.argv[1]]()
