"""A fault-injecting HTTP proxy in front of a local S3 server, for
tests/s3_source.sh: it forwards every request to UPSTREAM unchanged and,
by MODE, spoils some answers the way networks and busy servers do.

  s3_proxy.py PORT_FILE UPSTREAM_PORT MODE LOG

MODE "flaky": the first attempt of each distinct request (method, path,
Range) fails, in turn with a 503, a connection closed before any answer,
and a body cut short after its headers promised more; later attempts pass.
MODE "short": every GET body is cut to half of what its headers promise.
MODE "slow": every answer passes, each ranged GET forwarded only after the
time its bytes take at 20 MB/s, one request at a time (a long load, whose
requests reach the server throughout, so it can be stopped in the middle).
In every mode a request the server does not answer (stopped, restarting)
gets its connection closed, as a network would.
The port it listens on (127.0.0.1, chosen by the system) is written to
PORT_FILE; each spoiled answer appends a line to LOG. Runs until killed.
"""
import http.client
import http.server
import socketserver
import sys
import threading
import time

PORT_FILE, UPSTREAM, MODE, LOG = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
seen = {}
lock = threading.Lock()
slow_lock = threading.Lock()
FAULTS = ("503", "reset", "truncate")


def note(what):
    with lock, open(LOG, "a") as f:
        f.write(what + "\n")


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        c = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=30)
        c.request(self.command, self.path, body=body, headers=dict(self.headers))
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, r.getheaders(), data

    def fault(self):
        """The fault to inject into this request, or None."""
        if MODE == "short":
            return "truncate" if self.command == "GET" else None
        if MODE == "slow":
            return None
        key = (self.command, self.path, self.headers.get("Range"))
        with lock:
            k = seen.get(key, 0)
            seen[key] = k + 1
            if k:
                return None
            return FAULTS[len(seen) % len(FAULTS)] if self.command == "GET" else "503"

    def answer(self):
        fault = self.fault()
        if fault == "reset":
            note(f"reset {self.command} {self.path} {self.headers.get('Range')}")
            self.close_connection = True
            self.connection.close()
            return
        if MODE == "slow":  # the time the range takes at 20 MB/s, all connections in turn, before asking
            r = self.headers.get("Range") or ""
            try:
                a, b = r.split("=", 1)[1].split("-")
                n = int(b) - int(a) + 1
            except (IndexError, ValueError):
                n = 0
            with slow_lock:
                time.sleep(n / 20e6)
        try:
            status, headers, data = self.forward()
        except OSError:
            note(f"down {self.command} {self.path}")
            self.close_connection = True
            self.connection.close()
            return
        if fault == "503":
            note(f"503 {self.command} {self.path} {self.headers.get('Range')}")
            msg = b"<Error><Code>SlowDown</Code></Error>"
            self.send_response(503)
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            if self.command != "HEAD":  # a HEAD answer has no body (RFC 9110 9.3.2)
                self.wfile.write(msg)
            return
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in ("connection", "transfer-encoding", "date", "server"):
                self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        if fault == "truncate" and len(data) > 1:
            note(f"truncate {self.command} {self.path} {self.headers.get('Range')}")
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = answer


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = Server(("127.0.0.1", 0), Proxy)
with open(PORT_FILE, "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
