"""A Radarr for the contract run (scripts/schemathesis.sh) to ask for new copies of damaged
files: POST /libraries/{id}/health/files/{fileId}/regrab asks the connection that holds the
file, and with nothing answering it could only ever answer 503, never reach what it does
when the app answers.

It answers the calls condense makes of Radarr (src/domain/regrab.rs), as Radarr's API v3
documents them, for one movie whose folder is the seeded library's: GET /api/v3/movie,
GET /api/v3/moviefile?movieId=1 (every file in that folder now, numbered by name), DELETE
/api/v3/moviefile/{id} and POST /api/v3/command. Each call must carry the API key it was
given (X-Api-Key), as Radarr's would; anything else is a 404 or 401.

Usage: radarr.py FOLDER API_KEY PORT_FILE (writes the port it listens on, loopback only,
into PORT_FILE once it listens; runs until killed).
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

folder, api_key, port_file = sys.argv[1:]
MOVIE = 1


def files():
    names = sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n)))
    return [{"id": i + 1, "movieId": MOVIE, "path": os.path.join(folder, n)} for i, n in enumerate(names)]


class Radarr(BaseHTTPRequestHandler):
    def answer(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def allowed(self):
        if self.headers.get("X-Api-Key") == api_key:
            return True
        self.answer(401, {"message": "Unauthorized"})
        return False

    def do_GET(self):
        if not self.allowed():
            return
        url = urlsplit(self.path)
        if url.path == "/api/v3/movie":
            return self.answer(200, [{"id": MOVIE, "title": "Contract", "path": folder}])
        if url.path == "/api/v3/moviefile" and parse_qs(url.query).get("movieId") == [str(MOVIE)]:
            return self.answer(200, files())
        self.answer(404, {"message": "NotFound"})

    def do_DELETE(self):
        if not self.allowed():
            return
        prefix = "/api/v3/moviefile/"
        wanted = self.path[len(prefix):] if self.path.startswith(prefix) else None
        # Radarr forgets its record; the file itself stays for the rest of the run.
        if wanted is not None and any(str(f["id"]) == wanted for f in files()):
            return self.answer(200, {})
        self.answer(404, {"message": "NotFound"})

    def do_POST(self):
        if not self.allowed():
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            command = json.loads(self.rfile.read(length))
        except ValueError:
            return self.answer(400, {"message": "not JSON"})
        if self.path == "/api/v3/command" and command.get("name") == "MoviesSearch":
            return self.answer(201, {"id": 1, "name": "MoviesSearch", "status": "queued"})
        self.answer(404, {"message": "NotFound"})

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Radarr)
with open(port_file + ".tmp", "w") as out:
    out.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
