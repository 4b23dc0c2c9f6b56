"""The SDK's codes against the spec: a spec change without an SDK change fails."""

import os
import re
import unittest

from idem import CODES, ERRORS

SPEC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "api", "openapi.yaml")


def spec_codes():
    """The ErrorCode schema's table (code | status | retryable | retry_with) and enum."""
    with open(SPEC, encoding="utf-8") as f:
        text = f.read()
    block = text.split("\n    ErrorCode:\n", 1)[1].split("\n    Problem:\n", 1)[0]
    table = {}
    for code, status, retryable, retry_with in re.findall(r"\|\s*([a-z_]+)\s*\|\s*(\d{3})\s*\|\s*(true|false)\s*\|\s*([a-z_]+)\s*\|", block):
        table[code] = (int(status), retryable == "true", retry_with)
    enum = re.findall(r"^\s+- ([a-z_]+)$", block.split("enum:", 1)[1], re.M)
    return table, enum


class SpecTest(unittest.TestCase):
    def test_codes_match_the_spec(self):
        table, enum = spec_codes()
        self.assertGreater(len(enum), 10)
        self.assertEqual(sorted(enum), sorted(table), "the spec's enum and table disagree")
        self.assertEqual(CODES, table)
        self.assertEqual(sorted(ERRORS), sorted(enum))


if __name__ == "__main__":
    unittest.main()
