"""A real idemd for the tests: built once from this repository, started per test."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
START_TIMEOUT = 30.0  # seconds for a process to answer /healthz
_build_dir = None


def idemd_binary() -> str:
    """The test build of idemd (failpoints compiled in, armed only by GO_FAILPOINTS)."""
    global _build_dir
    if _build_dir is None:
        _build_dir = tempfile.mkdtemp(prefix="idemd-py-")
        atexit.register(shutil.rmtree, _build_dir, True)  # once, after every test module
        subprocess.run(["go", "build", "-o", os.path.join(_build_dir, "idemd"), "./cmd/idemd"], cwd=ROOT, check=True)
    return os.path.join(_build_dir, "idemd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """idemd on a fixed port and data dir, so that a restart keeps both."""

    def __init__(self, failpoints: str = ""):
        self.data = tempfile.mkdtemp(prefix="idemd-data-")
        self.addr = f"127.0.0.1:{free_port()}"
        self.base = "http://" + self.addr
        self.proc = None
        self.start(failpoints)

    def start(self, failpoints: str = "") -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GO_FAILPOINTS")}
        if failpoints:
            env["GO_FAILPOINTS"] = failpoints
        self.log = open(os.path.join(self.data, "idemd.log"), "ab")
        self.proc = subprocess.Popen([idemd_binary(), "-addr", self.addr, "-data", self.data, "-lease-ttl", "2s",
                                      "-maintain-interval", "100ms", "-separate-decide"],
                                     stdout=self.log, stderr=self.log, env=env)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"idemd did not become healthy: {open(self.log.name).read()[-2000:]}")
            time.sleep(0.02)  # poll step, bounded by the deadline

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.data, ignore_errors=True)
