"""Repeatability-First-Sent on every attempt of a key, against a scripted server."""

import email.utils
import http.server
import json
import threading
import time
import unittest

from idem import Client


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers 503 unavailable twice, then 201; records the header of each attempt."""

    seen = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Scripted.seen.append(self.headers.get("Repeatability-First-Sent"))
        if len(_Scripted.seen) % 3:
            body = json.dumps({"code": "unavailable", "status": 503, "retryable": True, "retry_with": "same_key"})
            self.send_response(503)
            self.send_header("Content-Type", "application/problem+json")
        else:
            body = json.dumps({"inserted": 1, "deleted": 0, "transformed": 0})
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
        data = body.encode()
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class FirstSentTest(unittest.TestCase):
    def setUp(self):
        _Scripted.seen = []
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.addCleanup(self.srv.server_close)
        self.addCleanup(self.srv.shutdown)
        self.client = Client(f"http://127.0.0.1:{self.srv.server_address[1]}", max_retries=3, backoff=lambda n: 0.01)

    def test_every_attempt_sends_the_first_attempts_time(self):
        before = int(time.time())
        self.client.batch("t", {"deletes": ["x"]}, key="k")
        seen = _Scripted.seen
        self.assertEqual(len(seen), 3)
        self.assertTrue(seen[0])
        self.assertEqual(seen, [seen[0]] * 3)
        at = email.utils.parsedate_to_datetime(seen[0]).timestamp()
        self.assertGreaterEqual(at, before)
        self.assertLessEqual(at, time.time())

    def test_a_given_first_sent_is_sent_as_is(self):
        self.client.batch("t", {"deletes": ["x"]}, key="k", first_sent=1796119200)  # 2026-12-01 10:00:00 UTC
        self.assertEqual(_Scripted.seen, ["Tue, 01 Dec 2026 10:00:00 GMT"] * 3)


if __name__ == "__main__":
    unittest.main()
