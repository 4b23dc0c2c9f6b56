"""An in-tree PEP 517 build backend for idem-client, standard library only.

The package is pure Python with no dependencies, so building its wheel is
zipping idem/ with the metadata beside it. Keeping the backend here means
`pip install sdk/python` needs nothing from a registry: no setuptools, no
wheel (an interpreter's bundled setuptools may lack bdist_wheel).
"""

import base64
import hashlib
import os
import tarfile
import zipfile

NAME = "idem_client"
DIST = "idem-client"
VERSION = "0.1.0"
SUMMARY = "Exactly-once batch writes against an Idem server (idemd): keys, retries and typed errors"
REQUIRES_PYTHON = ">=3.9"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "idem"


def _metadata():
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST}\nVersion: {VERSION}\nSummary: {SUMMARY}\n"
        f"Requires-Python: {REQUIRES_PYTHON}\n"
    )


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: idem_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _sources():
    src = os.path.join(ROOT, PACKAGE)
    for name in sorted(os.listdir(src)):
        if name.endswith(".py"):
            yield f"{PACKAGE}/{name}", os.path.join(src, name)


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = f"{NAME}-{VERSION}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    with open(os.path.join(metadata_directory, info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(metadata_directory, info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    info = f"{NAME}-{VERSION}.dist-info"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as whl:
        def add(arcname, data):
            whl.writestr(arcname, data)
            record.append(f"{arcname},{_digest(data)},{len(data)}")
        for arcname, path in _sources():
            with open(path, "rb") as f:
                add(arcname, f.read())
        add(f"{info}/METADATA", _metadata().encode())
        add(f"{info}/WHEEL", _wheel_file().encode())
        record.append(f"{info}/RECORD,,")
        whl.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{VERSION}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in ["pyproject.toml", "_build/idem_build.py"] + [a for a, _ in _sources()]:
            tar.add(os.path.join(ROOT, rel), arcname=f"{base}/{rel}")
    return name
