"""The in-tree build backend: a wheel of every module, metadata as pyproject says."""

import os
import re
import sys
import tempfile
import unittest
import zipfile

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, os.path.join(ROOT, "_build"))
import idem_build  # noqa: E402


class BuildTest(unittest.TestCase):
    def test_the_wheel_holds_every_module_and_the_project_metadata(self):
        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            project = f.read().split("[project]", 1)[1]
        fields = dict(re.findall(r'^(name|version|requires-python) = "([^"]*)"', project, re.M))
        self.assertEqual(fields["name"], idem_build.DIST)
        self.assertEqual(fields["version"], idem_build.VERSION)
        self.assertEqual(fields["requires-python"], idem_build.REQUIRES_PYTHON)
        with tempfile.TemporaryDirectory() as d:
            name = idem_build.build_wheel(d)
            with zipfile.ZipFile(os.path.join(d, name)) as whl:
                names = set(whl.namelist())
                record = whl.read(f"idem_client-{idem_build.VERSION}.dist-info/RECORD").decode()
        modules = {f"idem/{n}" for n in os.listdir(os.path.join(ROOT, "idem")) if n.endswith(".py")}
        self.assertTrue(modules, "no modules")
        self.assertTrue(modules <= names, modules - names)
        for m in modules:
            self.assertIn(m + ",sha256=", record)


if __name__ == "__main__":
    unittest.main()
