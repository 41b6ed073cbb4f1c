"""The HTTP client: one method per endpoint of idem's API (/v1)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from .errors import TransportError, api_error

if TYPE_CHECKING:  # pragma: no cover
    from .guard import Guard

# The decisions a check answers.
EXECUTE = "execute"
DUPLICATE = "duplicate"
IN_PROGRESS = "in_progress"
CONFIRM = "confirm"
UNCERTAIN = "uncertain"

MAX_RESPONSE_BYTES = 64 << 20


@dataclass
class Match:
    """The earlier call a decision refers to."""

    key: str
    tool: str = ""
    status: str = ""
    result: Any = None
    error: Any = None
    error_class: str = ""
    similarity: float = 0.0
    workflow_id: str = ""
    step_id: str = ""
    created_at_ms: int = 0

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Match":
        return cls(
            key=d.get("key", ""),
            tool=d.get("tool", ""),
            status=d.get("status", ""),
            result=d.get("result"),
            error=d.get("error"),
            error_class=d.get("error_class", ""),
            similarity=float(d.get("similarity", 0.0)),
            workflow_id=d.get("workflow_id", ""),
            step_id=d.get("step_id", ""),
            created_at_ms=int(d.get("created_at_ms", 0)),
        )


@dataclass
class Decision:
    """A check's answer. ``raw`` is the whole JSON answer."""

    decision: str
    stage: str
    key: str
    reason: str = ""
    policy: str = ""
    token: str = ""
    lease_until: str = ""
    match: Optional[Match] = None
    notes: List[str] = field(default_factory=list)
    budget_exceeded: bool = False
    replayed: bool = False
    timings_us: Dict[str, int] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict)

    @property
    def flagged(self) -> bool:
        """Whether the call must not execute now."""
        return self.decision != EXECUTE

    @classmethod
    def from_json(cls, d: Mapping[str, Any], replayed: bool = False) -> "Decision":
        m = d.get("match")
        return cls(
            decision=d.get("decision", ""),
            stage=d.get("stage", ""),
            key=d.get("key", ""),
            reason=d.get("reason", ""),
            policy=d.get("policy", ""),
            token=d.get("token", ""),
            lease_until=d.get("lease_until", ""),
            match=Match.from_json(m) if isinstance(m, Mapping) else None,
            notes=list(d.get("notes") or []),
            budget_exceeded=bool(d.get("budget_exceeded", False)),
            replayed=replayed,
            timings_us=dict(d.get("timings_us") or {}),
            raw=dict(d),
        )


@dataclass
class Record:
    """A ledger record (never carrying the lease token)."""

    key: str
    status: str
    tool: str = ""
    outcome: str = ""
    result: Any = None
    error: Any = None
    error_class: str = ""
    session_id: str = ""
    workflow_id: str = ""
    step_id: str = ""
    attempt: int = 0
    #: the key of the earlier call the check confirmed this execution as
    #: another action than (``confirmed`` of check); "" when none
    confirmed: str = ""
    lease_until_ms: int = 0
    created_at_ms: int = 0
    updated_at_ms: int = 0
    raw: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Record":
        return cls(
            key=d.get("key", ""),
            status=d.get("status", ""),
            tool=d.get("tool", ""),
            outcome=d.get("outcome", ""),
            result=d.get("result"),
            error=d.get("error"),
            error_class=d.get("error_class", ""),
            session_id=d.get("session_id", ""),
            workflow_id=d.get("workflow_id", ""),
            step_id=d.get("step_id", ""),
            attempt=int(d.get("attempt", 0)),
            confirmed=d.get("confirmed", ""),
            lease_until_ms=int(d.get("lease_until_ms", 0)),
            created_at_ms=int(d.get("created_at_ms", 0)),
            updated_at_ms=int(d.get("updated_at_ms", 0)),
            raw=dict(d),
        )


@dataclass
class Workflow:
    """A workflow's records in arrival order."""

    workflow_id: str
    steps: List[Record]


Lease = Union[str, int, float, timedelta]


def lease_value(lease: Lease) -> int:
    """A lease in milliseconds, as the API takes it (``lease_ms``), from a
    duration string ("5m", "1h30m", "90s", "250ms"), milliseconds or a timedelta."""
    if isinstance(lease, timedelta):
        return int(lease.total_seconds() * 1000)
    if isinstance(lease, bool):
        raise TypeError("lease: want a duration string, milliseconds or a timedelta")
    if isinstance(lease, (int, float)):
        return int(lease)
    if isinstance(lease, str) and lease:
        return _duration_ms(lease)
    raise TypeError("lease: want a duration string, milliseconds or a timedelta")


_UNITS_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}


def _duration_ms(text: str) -> int:
    """Milliseconds of a Go-style duration: one or more number-unit pairs."""
    total, i = 0.0, 0
    while i < len(text):
        j = i
        while j < len(text) and (text[j].isdigit() or text[j] == "."):
            j += 1
        k = j
        while k < len(text) and text[k].isalpha():
            k += 1
        num, unit = text[i:j], text[j:k]
        if not num or unit not in _UNITS_MS:
            raise ValueError("lease: %r is not a duration such as 5m or 90s" % text)
        total += float(num) * _UNITS_MS[unit]
        i = k
    return int(total)


class Client:
    """A client of one idem server. It holds no state besides its settings and is safe to share between threads.

    ``timeout`` bounds each request (seconds) and must exceed the longest wait a
    check asks for; ``wait`` is how long ``guard`` asks the server to wait for
    an in-flight twin per check, ``max_in_progress`` how many checks it makes
    before giving up on a call that stays in progress.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        api_key: Optional[str] = None,
        timeout: float = 60.0,
        wait: float = 10.0,
        max_in_progress: int = 3,
    ) -> None:
        u = urllib.parse.urlparse(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"base_url: {base_url!r} is not an http(s) URL")
        if timeout <= 0:
            raise ValueError("timeout: must be positive")
        if wait < 0:
            raise ValueError("wait: must not be negative")
        if max_in_progress < 1:
            raise ValueError("max_in_progress: must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.wait = wait
        self.max_in_progress = max_in_progress

    # -- endpoints ---------------------------------------------------------

    def check(
        self,
        *,
        session_id: str,
        tool: str,
        arguments: Union[Mapping[str, Any], str, None] = None,
        workflow_id: Optional[str] = None,
        step_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        attempt: Optional[Mapping[str, Any]] = None,
        wait_ms: Optional[int] = None,
        takeover: bool = False,
        reference_time: Optional[str] = None,
        confirmed: Optional[str] = None,
    ) -> Decision:
        """Ask whether the call may execute (POST /v1/check).

        ``arguments`` is a JSON object (a mapping, or a string holding one, as
        OpenAI-style tool calls carry them). ``attempt`` is
        ``{"kind": "first"|"transient"|"sampling", "number": n, "error": ...}``.
        ``confirmed`` names the key of the earlier call a confirm decision named,
        when the call is meant to run anyway.
        """
        body: Dict[str, Any] = {
            "session_id": session_id,
            "tool": tool,
            "arguments": {} if arguments is None else arguments,
        }
        for k, v in (
            ("workflow_id", workflow_id),
            ("step_id", step_id),
            ("idempotency_key", idempotency_key),
            ("attempt", attempt),
            ("wait_ms", wait_ms),
            ("reference_time", reference_time),
            ("confirmed", confirmed),
        ):
            if v is not None:
                body[k] = v
        if takeover:
            body["takeover"] = True
        data, headers = self._do("POST", "/v1/check", body)
        return Decision.from_json(data, replayed=headers.get("Idempotent-Replayed") == "true")

    def complete(self, key: str, token: str, result: Any) -> Record:
        """Record ``result`` (JSON-serializable) as the outcome of the execution holding ``token``."""
        data, _ = self._do("POST", "/v1/complete", {"key": key, "token": token, "result": result})
        return Record.from_json(data)

    def fail(self, key: str, token: str, error: Any, transient: bool = True) -> Record:
        """Record ``error`` as the execution's failure: transient lets the key run again, permanent is replayed."""
        body = {"key": key, "token": token, "error": error, "transient": transient}
        data, _ = self._do("POST", "/v1/fail", body)
        return Record.from_json(data)

    def renew(self, key: str, token: str, lease: Lease) -> Record:
        """Extend the lease of the execution holding ``token`` (POST /v1/renew).

        ``lease`` is a duration string ("5m"), milliseconds, or a timedelta. A
        server without the endpoint answers ``NotFoundError``.
        """
        data, _ = self._do("POST", "/v1/renew", {"key": key, "token": token, "lease_ms": lease_value(lease)})
        return Record.from_json(data)

    def record(self, key: str) -> Record:
        """The record under ``key`` (GET /v1/records/{key})."""
        data, _ = self._do("GET", "/v1/records/" + urllib.parse.quote(key, safe=""), None)
        return Record.from_json(data)

    def forget(self, key: str) -> None:
        """Delete the record under ``key``."""
        self._do("DELETE", "/v1/records/" + urllib.parse.quote(key, safe=""), None)

    def workflow(self, workflow_id: str) -> Workflow:
        """A workflow's records in arrival order (GET /v1/workflows/{id})."""
        data, _ = self._do("GET", "/v1/workflows/" + urllib.parse.quote(workflow_id, safe=""), None)
        return Workflow(
            workflow_id=data.get("workflow_id", workflow_id),
            steps=[Record.from_json(r) for r in data.get("steps") or []],
        )

    def guard(
        self,
        *,
        session_id: str,
        tool: str,
        arguments: Union[Mapping[str, Any], str, None] = None,
        workflow_id: Optional[str] = None,
        step_id: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        attempt: Optional[Mapping[str, Any]] = None,
        reference_time: Optional[str] = None,
        confirmed: Optional[str] = None,
    ) -> "Guard":
        """Wrap one side-effecting call: use the result as a decorator or a context manager (see ``Guard``)."""
        from .guard import Guard

        return Guard(
            self,
            dict(
                session_id=session_id,
                tool=tool,
                arguments=arguments,
                workflow_id=workflow_id,
                step_id=step_id,
                idempotency_key=idempotency_key,
                attempt=attempt,
                reference_time=reference_time,
                confirmed=confirmed,
            ),
        )

    # -- transport ---------------------------------------------------------

    def _do(self, method: str, path: str, body: Optional[Mapping[str, Any]]) -> "tuple[Dict[str, Any], Mapping[str, str]]":
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read(MAX_RESPONSE_BYTES)
                return _decode(raw, method, path), resp.headers
        except urllib.error.HTTPError as e:
            raw = e.read(MAX_RESPONSE_BYTES) if e.fp is not None else b""
            try:
                problem = json.loads(raw) if raw else {}
            except ValueError:
                problem = {}
            if not isinstance(problem, dict):
                problem = {}
            if not problem.get("detail"):
                problem["detail"] = raw[:200].decode("utf-8", "replace").strip() or (e.reason or "")
            problem.setdefault("title", e.reason or "")
            retry = e.headers.get("Retry-After") if e.headers else None
            try:
                retry_after = float(retry) if retry else None
            except ValueError:
                retry_after = None
            raise api_error(e.code, problem, retry_after) from None
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError) as e:
            raise TransportError(f"idem: {method} {path}: {e}") from e


def _decode(raw: bytes, method: str, path: str) -> Dict[str, Any]:
    if not raw:
        return {}
    try:
        out = json.loads(raw)
    except ValueError as e:
        raise TransportError(f"idem: {method} {path}: decoding the response: {e}") from e
    if not isinstance(out, dict):
        raise TransportError(f"idem: {method} {path}: the response is not a JSON object")
    return out
