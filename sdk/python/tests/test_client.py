"""The Python SDK against a real idemd process each test starts."""

import json
import os
import threading
import time
import unittest
import urllib.request

from idem import (Client, DocumentNotFoundError, IdempotencyKeyMismatchError, IdempotencyRequestInProgressError,
                  TableNotFoundError)

from tests._server import Server

FAILPOINTS = os.environ.get("IDEM_SDK_FAILPOINTS", "1") == "1"  # the test build of idemd has them


def inc(doc_id):
    return {"inserts": [{"id": "mark-" + doc_id, "doc": {}}],
            "transforms": [{"id": "ctr-" + doc_id, "ops": [{"op": "$inc", "path": "n", "value": 1}], "upsert": True}]}


def counter(c, table, doc_id):
    try:
        return c.doc(table, "ctr-" + doc_id)["n"]
    except DocumentNotFoundError:
        return 0


def await_started(server, table, key, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{server.base}/v1/receipts/{table}/{key}", timeout=1) as r:
                if json.loads(r.read()).get("state") == "started":
                    return
        except OSError:
            pass
        time.sleep(0.02)  # poll step, bounded by the deadline
    raise AssertionError("the receipt never started")


class ClientTest(unittest.TestCase):
    def server(self, failpoints=""):
        s = Server(failpoints)
        self.addCleanup(s.stop)
        return s

    def test_commit_replay_mismatch_and_not_applied(self):
        s = self.server()
        c = Client(s.base)
        self.assertTrue(c.create_table("orders"))
        first = c.batch("orders", inc("a"), key="k1")
        self.assertEqual((first.inserted, first.transformed, first.replayed, first.key), (1, 1, False, "k1"))
        self.assertEqual(len(first.transaction_id), 32)
        again = c.batch("orders", inc("a"), key="k1")
        self.assertTrue(again.replayed)
        self.assertEqual(again.transaction_id, first.transaction_id)
        with self.assertRaises(IdempotencyKeyMismatchError) as cm:
            c.batch("orders", inc("other"), key="k1")
        self.assertEqual((cm.exception.status, cm.exception.outcome, cm.exception.retryable), (422, "not_applied", False))
        # Without a key, each call is its own: two calls, two applications.
        one, two = c.batch("orders", inc("b")), c.batch("orders", inc("b"))
        self.assertNotEqual(one.key, two.key)
        self.assertEqual(counter(c, "orders", "b"), 2)
        # not_applied on a missing table, replayed as is once it exists.
        with self.assertRaises(TableNotFoundError) as cm:
            c.batch("late", inc("x"), key="k-late")
        self.assertEqual(cm.exception.outcome, "not_applied")
        self.assertTrue(cm.exception.transaction_id)
        c.create_table("late")
        with self.assertRaises(TableNotFoundError):
            c.batch("late", inc("x"), key="k-late")

    @unittest.skipUnless(FAILPOINTS, "needs idemd's failpoints")
    def test_in_progress_answers_typed_or_waits(self):
        s = self.server("receipt/decide-before=1*sleep(4000)")
        c = Client(s.base, max_retries=-1)
        c.create_table("t")
        done = {}
        t = threading.Thread(target=lambda: done.setdefault("r", c.batch("t", inc("k"), key="k")))
        t.start()
        await_started(s, "t", "k")
        with self.assertRaises(IdempotencyRequestInProgressError) as cm:
            c.batch("t", inc("k"), key="k")
        self.assertEqual((cm.exception.retry_with, cm.exception.outcome), ("same_key", "pending"))
        waited = c.batch("t", inc("k"), key="k", wait=20)
        t.join()
        self.assertEqual(waited.transaction_id, done["r"].transaction_id)
        self.assertEqual(counter(c, "t", "k"), 1)

    @unittest.skipUnless(FAILPOINTS, "needs idemd's failpoints")
    def test_a_retry_across_a_server_restart_applies_once(self):
        s = self.server("receipt/decide-before=1*sleep(30000)")
        c = Client(s.base, max_retries=50, backoff=lambda n: 0.1)
        c.create_table("t")
        out = {}

        def call():
            try:
                out["r"] = c.batch("t", inc("k"), key="k")
            except Exception as e:  # reported below
                out["e"] = e
        t = threading.Thread(target=call)
        t.start()
        await_started(s, "t", "k")
        s.kill()
        s.start()  # the same data dir and address; no failpoint
        t.join(timeout=60)
        self.assertNotIn("e", out)
        self.assertEqual(out["r"].inserted, 1)
        self.assertEqual(counter(c, "t", "k"), 1)

    @unittest.skipUnless(FAILPOINTS, "needs idemd's failpoints")
    def test_the_timeout_bounds_each_attempt(self):
        s = self.server("receipt/decide-before=1*sleep(10000)")
        c = Client(s.base, timeout=0.3, max_retries=-1)
        c.create_table("t")
        started = time.monotonic()
        with self.assertRaises(OSError):  # socket.timeout / TimeoutError
            c.batch("t", inc("k"), key="k")
        self.assertLess(time.monotonic() - started, 5)
        s.kill()  # not a graceful stop, which would wait for the held-up decision


if __name__ == "__main__":
    unittest.main()
