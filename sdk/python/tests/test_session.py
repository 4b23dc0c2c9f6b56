"""Sessions through the Python SDK: against a real idemd, and their retries against scripted answers."""

import contextlib
import http.server
import io
import json
import textwrap
import threading
import unittest
from datetime import timedelta

import idem
from idem import (Client, DocumentNotFoundError, IdempotencyReceiptPendingError, SessionAbortedError,
                  SessionCommittedError, SessionNotFoundError, StagedBatch, TransactionConflictError,
                  UnavailableError)

from tests._server import Server


def inc(doc_id, path, by):
    return {"transforms": [{"id": doc_id, "ops": [{"op": "$inc", "path": path, "value": by}]}]}


class SessionTest(unittest.TestCase):
    def server(self):
        s = Server()
        self.addCleanup(s.stop)
        return s

    def test_stage_read_own_writes_commit_replay(self):
        c = Client(self.server().base)
        c.create_table("orders")
        c.create_table("stock")
        c.batch("stock", {"inserts": [{"id": "widget", "doc": {"n": 10}}]})

        s = c.begin_session(ttl=60, table="orders")
        self.assertRegex(s.id, r"^s[0-9a-f]{32}$")
        info = s.stage("orders", {"inserts": [{"id": "o-1", "doc": {"total": 12}}]})
        self.assertEqual((info.state, info.stages, info.staged), ("open", 1, (StagedBatch("orders", 1, 0, 0),)))
        self.assertEqual(info.expires_at - info.created_at, timedelta(seconds=60))
        info = s.stage_tables({"stock": inc("widget", "n", -1), "orders": inc("o-1", "total", 1)})
        self.assertEqual(info.stages, 2)
        self.assertEqual(info.staged, (StagedBatch("orders", 0, 0, 1), StagedBatch("stock", 0, 0, 1)))
        self.assertEqual(info.result, {"inserted": 1, "deleted": 0, "transformed": 2})

        self.assertEqual(s.get("orders", "o-1"), {"total": 13})
        self.assertEqual(s.get("stock", "widget"), {"n": 9})
        with self.assertRaises(DocumentNotFoundError):
            c.doc("orders", "o-1")  # staged, not visible outside the session before the commit
        self.assertEqual(c.doc("stock", "widget"), {"n": 10})

        first = s.commit()
        self.assertEqual((first.inserted, first.deleted, first.transformed, first.replayed, first.key),
                         (1, 0, 2, False, s.id))
        self.assertEqual(len(first.transaction_id), 32)
        self.assertEqual(c.doc("orders", "o-1"), {"total": 13})
        self.assertEqual(c.doc("stock", "widget"), {"n": 9})

        again = s.commit()
        self.assertTrue(again.replayed)
        self.assertEqual((again.inserted, again.deleted, again.transformed, again.transaction_id),
                         (first.inserted, first.deleted, first.transformed, first.transaction_id))
        # A handle by ID, under another key: the session's one commit, replayed.
        other = c.session(s.id).commit(key="another-key", wait=1)
        self.assertEqual((other.replayed, other.transaction_id, other.key), (True, first.transaction_id, "another-key"))
        self.assertEqual(c.doc("stock", "widget"), {"n": 9})

        info = s.info()
        self.assertEqual((info.state, info.commit_key, info.transaction_id, info.stages),
                         ("committed", s.id, first.transaction_id, 2))
        self.assertIsNotNone(info.retained_until)
        with self.assertRaises(SessionCommittedError) as cm:
            s.stage("orders", {"deletes": ["o-1"]})
        self.assertEqual((cm.exception.status, cm.exception.retryable), (409, False))
        with self.assertRaises(SessionCommittedError):
            s.abort()

    def test_a_changed_read_is_a_transaction_conflict(self):
        c = Client(self.server().base)
        c.create_table("t")
        c.batch("t", {"inserts": [{"id": "x", "doc": {"n": 1}}]})
        s = c.begin_session()
        self.assertEqual(s.get("t", "x"), {"n": 1})
        s.stage("t", {"inserts": [{"id": "y", "doc": {}}]})
        c.batch("t", inc("x", "n", 5), key="meanwhile")

        with self.assertRaises(TransactionConflictError) as cm:
            s.commit(key="c1")
        e = cm.exception
        self.assertEqual((e.status, e.outcome, e.retry_with, e.retry, e.new_session_needed),
                         (409, "aborted", "none", "new_session", True))
        info = s.info()
        self.assertEqual((info.state, info.commit_outcome, info.commit_code), ("committed", "aborted", "transaction_conflict"))
        self.assertEqual(len(e.transaction_id), 32)
        with self.assertRaises(TransactionConflictError) as again:
            s.commit(key="c1")
        self.assertEqual((again.exception.outcome, again.exception.transaction_id, again.exception.detail),
                         (e.outcome, e.transaction_id, e.detail))
        with self.assertRaises(DocumentNotFoundError):
            c.doc("t", "y")
        self.assertEqual(c.doc("t", "x"), {"n": 6})

    def test_run_session_begins_a_new_session_only_when_opted_in(self):
        srv = self.server()
        for retries in (0, 1):
            c = Client(srv.base, conflict_retries=retries, backoff=lambda n: 0.001)
            tbl = f"t{retries}"
            c.create_table(tbl)
            c.batch(tbl, {"inserts": [{"id": "x", "doc": {"n": 1}}]})
            runs = []

            def work(s):
                runs.append(s.id)
                n = s.get(tbl, "x")["n"]
                s.stage(tbl, {"inserts": [{"id": "x", "doc": {"n": 10 * n}}]})
                if len(runs) == 1:  # someone else changes x before the first commit
                    c.batch(tbl, inc("x", "n", 1))

            if retries == 0:
                with self.assertRaises(TransactionConflictError) as cm:
                    c.run_session(work)
                self.assertTrue(cm.exception.new_session_needed)
                self.assertEqual((len(runs), c.doc(tbl, "x")), (1, {"n": 2}))
            else:
                r = c.run_session(work)
                self.assertEqual((len(runs), r.inserted, c.doc(tbl, "x")), (2, 1, {"n": 20}))

    def test_aborted_and_unknown_sessions(self):
        c = Client(self.server().base)
        c.create_table("t")
        s = c.begin_session()
        s.stage("t", {"inserts": [{"id": "y", "doc": {}}]})
        info = s.abort()
        self.assertEqual((info.state, info.reason), ("aborted", "aborted"))
        self.assertIsNotNone(info.retained_until)
        self.assertEqual(s.abort().state, "aborted")
        with self.assertRaises(SessionAbortedError) as cm:
            s.commit()
        self.assertEqual((cm.exception.status, cm.exception.retryable), (409, False))
        with self.assertRaises(SessionAbortedError):
            s.stage("t", {"deletes": ["y"]})
        with self.assertRaises(SessionAbortedError):
            s.get("t", "y")
        with self.assertRaises(DocumentNotFoundError):
            c.doc("t", "y")

        # Leaving a with block without a commit aborts the session.
        with self.assertRaises(KeyError):
            with c.begin_session() as left:
                left.stage("t", {"inserts": [{"id": "z", "doc": {}}]})
                raise KeyError("the caller's own failure, not hidden")
        self.assertEqual(left.info().reason, "aborted")
        with c.begin_session() as done:
            done.stage("t", {"inserts": [{"id": "z", "doc": {}}]})
            done.commit()
        self.assertEqual(done.info().state, "committed")

        gone = c.session("s" + "0123456789abcdef" * 2)
        for call in (gone.info, gone.commit, lambda: gone.stage("t", {"deletes": ["y"]})):
            with self.assertRaises(SessionNotFoundError) as cm:
                call()
            self.assertEqual(cm.exception.status, 404)

    def test_the_docstring_session_example_runs(self):
        c = Client(self.server().base)
        c.create_table("orders")
        c.create_table("stock")
        snippet = textwrap.dedent(idem.__doc__.rsplit("\n\n", 1)[1])
        self.assertIn("begin_session", snippet)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(snippet, {"c": c})
        self.assertEqual(out.getvalue(), "{'total': 5}\n1 1\n")


SID = "s0123456789abcdef0123456789abcdef"
SESSION = {"session_id": SID, "state": "open", "created_at": "2025-01-01T00:00:00.123Z",
           "expires_at": "2025-01-01T00:00:30.123456789Z", "stages": 1, "documents": 1, "writes": 1,
           "result": {"inserted": 1, "deleted": 0, "transformed": 0},
           "staged": [{"table": "t", "inserted": 1, "deleted": 0, "transformed": 0}]}


def problem(status, code, retryable, retry_with=None, outcome=None):
    body = {"code": code, "retryable": retryable}
    if retry_with:
        body["retry_with"] = retry_with
    if outcome:
        body["outcome"] = outcome
    return (status, body)


OK, LOST = "ok", "lost"


class Scripted:
    """A local HTTP server answering from a script: a (status, problem) pair, OK (the route's success)
    or LOST (the connection drops before an answer)."""

    def __init__(self, script):
        self.script, self.calls, self.keys = script, 0, set()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def handle_one(self):
                n = min(outer.calls, len(outer.script) - 1)
                outer.calls += 1
                outer.keys.add(self.headers.get("Idempotency-Key"))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                step = outer.script[n]
                if step == LOST:
                    self.close_connection = True
                    return
                status, body, headers = 200, SESSION, {}
                if step != OK:
                    status, body = step
                elif self.path.endswith("/commit") or self.path.startswith("/v1/tables/"):
                    status, body, headers = 201, {"inserted": 1, "deleted": 0, "transformed": 0}, {"Idem-Transaction-Id": "t1"}
                elif "/docs/" in self.path:
                    body = {"id": "d", "doc": {"n": 1}}
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if status < 300 else "application/problem+json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = handle_one

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class SessionRetryTest(unittest.TestCase):
    """get, info and abort are retried as idempotent calls, commit as a keyed call (under one key, or none:
    the session's), stage — not idempotent, unkeyed — only on 429 overloaded."""

    CASES = [
        ("stage: overloaded, then staged", "stage", [problem(429, "overloaded", True), OK], None, 2),
        ("stage: a lost answer is not retried", "stage", [LOST, OK], OSError, 1),
        ("stage: unavailable is not retried", "stage", [problem(503, "unavailable", True), OK], UnavailableError, 1),
        ("stage: internal is not retried", "stage", [problem(500, "internal", True), OK], idem.InternalError, 1),
        ("get: a lost answer, then the document", "get", [LOST, OK], None, 2),
        ("info: unavailable, then the session", "info", [problem(503, "unavailable", True), OK], None, 2),
        ("abort: a lost answer, then aborted", "abort", [LOST, OK], None, 2),
        ("commit, no key: pending, lost, then the commit", "commit",
         [problem(503, "idempotency_receipt_pending", True, "same_key"), LOST, OK], None, 3),
        ("commit, a key: in progress, then the commit", "commit_k",
         [problem(409, "idempotency_request_in_progress", True, "same_key"), OK], None, 2),
        ("commit: pending past the retries", "commit",
         [problem(503, "idempotency_receipt_pending", True, "same_key")], IdempotencyReceiptPendingError, 4),
        ("commit: a conflict is final", "commit", [problem(409, "transaction_conflict", True, "new_key"), OK],
         TransactionConflictError, 1),
        ("commit: session_aborted is final", "commit", [problem(409, "session_aborted", False, "none"), OK],
         SessionAbortedError, 1),
    ]

    def test_what_each_call_retries(self):
        calls = {
            "stage": lambda s: s.stage("t", {"inserts": [{"id": "d", "doc": {}}]}),
            "get": lambda s: s.get("t", "d"),
            "info": lambda s: s.info(),
            "abort": lambda s: s.abort(),
            "commit": lambda s: s.commit(),
            "commit_k": lambda s: s.commit(key="k"),
        }
        for name, call, script, want, n in self.CASES:
            with self.subTest(name):
                srv = Scripted(script)
                self.addCleanup(srv.close)
                s = Client(srv.base, max_retries=3, backoff=lambda n: 0.001).session(SID)
                if want is None:
                    out = calls[call](s)
                    if call.startswith("commit"):
                        self.assertEqual((out.key, out.transaction_id), ("k" if call == "commit_k" else SID, "t1"))
                    if call == "stage":
                        self.assertEqual(out.staged, (StagedBatch("t", 1, 0, 0),))
                        self.assertEqual(out.expires_at.microsecond, 123456)
                else:
                    with self.assertRaises(want):
                        calls[call](s)
                self.assertEqual(srv.calls, n)
                self.assertEqual(srv.keys, {"k" if call == "commit_k" else None})


if __name__ == "__main__":
    unittest.main()


class ConflictRetryTest(unittest.TestCase):
    """A batch's transaction_conflict abort is tried again under a new key only with conflict_retries."""

    def test_only_when_opted_in(self):
        conflict = problem(409, "transaction_conflict", True, "new_key", outcome="aborted")
        for name, retries, script, commits, n in [
            ("off by default", 0, [conflict, OK], False, 1),
            ("opted in: a new key, then the commit", 2, [conflict, conflict, OK], True, 3),
            ("opted in, past the retries", 1, [conflict, conflict, OK], False, 2),
        ]:
            with self.subTest(name):
                srv = Scripted(script)
                self.addCleanup(srv.close)
                c = Client(srv.base, conflict_retries=retries, backoff=lambda n: 0.001)
                if commits:
                    r = c.batch("t", {"deletes": ["x"]})
                    self.assertIn(r.key, srv.keys)
                else:
                    with self.assertRaises(TransactionConflictError):
                        c.batch("t", {"deletes": ["x"]})
                self.assertEqual((srv.calls, len(srv.keys)), (n, n))
