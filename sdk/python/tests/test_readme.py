"""The README's Python snippet, run as written against a real idemd."""

import contextlib
import io
import os
import unittest

from tests._server import Server

README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")


class ReadmeTest(unittest.TestCase):
    def test_the_readme_snippet_runs(self):
        with open(README, encoding="utf-8") as f:
            text = f.read()
        section = text.split("## SDKs", 1)[1]
        snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
        s = Server()
        self.addCleanup(s.stop)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(snippet.replace("http://127.0.0.1:8420", s.base), {})
        lines = out.getvalue().splitlines()
        self.assertEqual(len(lines), 2, out.getvalue())
        self.assertRegex(lines[0], r"^1 False [0-9a-f]{32}$")
        self.assertEqual(lines[1], "422 not_applied")


if __name__ == "__main__":
    unittest.main()
