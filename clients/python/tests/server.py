"""A real ``idem serve`` for the tests: built from this repository with ``go build``, on a loopback port, with one API key."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import unittest
from typing import List, Optional

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


class Server:
    """One ``idem serve`` process; ``url`` and ``api_key`` reach it."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="idem-py-")
        self.proc: Optional[subprocess.Popen] = None
        self.url = ""
        self.api_key = ""
        self.log: List[str] = []

    def start(self) -> None:
        go = shutil.which("go")
        if go is None:
            raise unittest.SkipTest("the go command is not on PATH: cannot build idem for the Python client's tests")
        binary = os.path.join(self.dir, "idem")
        build = subprocess.run(
            [go, "build", "-o", binary, "./cmd/idem"], cwd=REPO, capture_output=True, text=True
        )
        if build.returncode != 0:
            raise RuntimeError("go build ./cmd/idem failed:\n" + build.stderr)
        key = subprocess.run([binary, "key", "--tenant", "acme"], capture_output=True, text=True, check=True).stdout
        self.api_key = key.split()[0]
        sha = re.search(r"sha256: ([0-9a-f]{64})", key)
        assert sha, key
        config = os.path.join(self.dir, "idem.yaml")
        with open(config, "w") as f:
            # A large budget: the tests assert semantic decisions, which must
            # not depend on the machine's speed.
            f.write(
                "listen: 127.0.0.1:0\n"
                f"data_dir: {os.path.join(self.dir, 'data')}\n"
                "store: {sync_writes: false}\n"
                "budget: 20s\n"
                "log: {level: warn}\n"
                f"auth:\n  keys:\n    - {{tenant: acme, sha256: {sha.group(1)}}}\n"
            )
        env = {k: v for k, v in os.environ.items() if not k.startswith("IDEM_")}
        self.proc = subprocess.Popen(
            [binary, "serve", "--config", config],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://\S+)", line)
        if not m:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"idem serve printed no address: {line!r}\n{err}")
        self.url = m.group(1)
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
