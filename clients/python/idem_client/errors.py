"""Errors of the idem client, and how a tool's failure is classed."""

from __future__ import annotations

import socket
import urllib.error
from typing import TYPE_CHECKING, Any, Dict, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .client import Decision


class IdemError(Exception):
    """Base of every error this package raises."""


class TransportError(IdemError):
    """The server could not be reached, or its answer could not be read."""


class APIError(IdemError):
    """An error answer of the server: its problem+json document.

    ``field`` names the offending field when the server knows it
    (``"session_id"``, ``"arguments.items[2].note"``, ``"Authorization"``).
    """

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        field: Optional[str] = None,
        type: str = "about:blank",
        retry_after: Optional[float] = None,
        body: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(f"idem: {status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field
        self.type = type
        self.retry_after = retry_after
        self.body: Dict[str, Any] = body or {}

    @property
    def status_code(self) -> int:
        """The HTTP status (so ``classify`` reads it)."""
        return self.status


class BadRequestError(APIError):
    """400, 413, 415, 422: the request is wrong; ``field`` says where."""


class AuthError(APIError):
    """401 or 403: no API key, or a wrong one."""


class NotFoundError(APIError):
    """404: no record under the key, or no such endpoint."""


class ConflictError(APIError):
    """409: a stale lease token, or a record already finished."""


class UnavailableError(APIError):
    """503: the store is busy or down; ``retry_after`` says when to retry."""


class ServerError(APIError):
    """Any other 5xx: the server's fault (the detail is in its log)."""


def api_error(status: int, body: Dict[str, Any], retry_after: Optional[float]) -> APIError:
    cls: type
    if status in (400, 413, 415, 422):
        cls = BadRequestError
    elif status in (401, 403):
        cls = AuthError
    elif status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = ConflictError
    elif status == 503:
        cls = UnavailableError
    elif status >= 500:
        cls = ServerError
    else:
        cls = APIError
    return cls(
        status=status,
        title=str(body.get("title") or ""),
        detail=str(body.get("detail") or ""),
        field=body.get("field") or None,
        type=str(body.get("type") or "about:blank"),
        retry_after=retry_after,
        body=body,
    )


class FlaggedError(IdemError):
    """The guarded call was not run: idem flagged it.

    ``str(err)`` is written for the model (what happened and how to go
    on); ``decision`` is the check's answer (decision, reason, match, key).
    """

    lead = "idem: the call was not run"
    advice = ""

    def __init__(self, decision: "Decision") -> None:
        self.decision = decision
        super().__init__(self._message())

    def _message(self) -> str:
        d = self.decision
        msg = f"{self.lead}: {d.reason}"
        m = d.match
        if m is not None and m.key:
            msg += f" (earlier call {m.key!r}, {m.status}"
            if 0 < m.similarity < 1:
                msg += f", similarity {m.similarity:.2f}"
            msg += ")"
        advice = self.advice.format(key=d.key, match=m.key if m else d.key)
        return msg + ("." if not msg.endswith(".") else "") + (" " + advice if advice else "")


class ConfirmError(FlaggedError):
    """A very similar call already ran: ask before running this one."""

    lead = "idem: a very similar call already ran"
    advice = ("The call was not run. If it is really a different action, make the same call again "
              "with confirmed={match!r}.")


class UncertainError(FlaggedError):
    """An earlier execution lost its lease without a result: its effect may or may not have happened."""

    lead = "idem: an earlier execution of this call may or may not have taken effect"
    advice = "The call was not run. Check whether the effect happened before retrying; key {key}."


class InProgressError(FlaggedError):
    """The same call stayed in progress through every wait."""

    lead = "idem: the same call is still being executed"
    advice = "The call was not run again; ask for its result later."


class FailedBeforeError(FlaggedError):
    """The call already failed permanently; ``decision.match.error`` is its recorded error."""

    lead = "idem: this call already failed permanently"

    def _message(self) -> str:
        msg = super()._message()
        m = self.decision.match
        if m is not None and m.error is not None:
            msg += f" Its error was: {m.error}"
        return msg


class NotRecordedError(IdemError):
    """The function ran but its outcome could not be recorded; ``result`` is what it returned."""

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class PermanentError(Exception):
    """Raise (or raise ``from``) this in a guarded function: the failure will happen again.

    The guard records it as permanent; later checks of the key replay it.
    """


class TransientError(Exception):
    """Raise (or raise ``from``) this in a guarded function: the failure may pass.

    The guard records it as transient; the key may run again.
    """


TRANSIENT_STATUS = {408, 429, 502, 503, 504}
PERMANENT_STATUS = {400, 401, 403, 404, 409, 422}


def _status_of(exc: BaseException) -> Optional[int]:
    for attr in ("status_code", "status", "code"):
        v = getattr(exc, attr, None)
        if isinstance(v, int) and not isinstance(v, bool) and 100 <= v < 600:
            return v
    resp = getattr(exc, "response", None)  # requests, httpx
    v = getattr(resp, "status_code", None)
    if isinstance(v, int) and 100 <= v < 600:
        return v
    return None


def classify(exc: BaseException) -> str:
    """Class a failure as ``"transient"`` or ``"permanent"``, as the Go client's ``ledger.ClassifyError`` does.

    ``PermanentError``/``TransientError`` anywhere in the chain (``raise ... from``)
    decide; then an HTTP status the exception carries (``status_code``, ``status``,
    ``code``, ``response.status_code``; also ``urllib.error.HTTPError``): 400, 401,
    403, 404, 409, 422 are permanent, 408, 429, 502, 503, 504 and any other status
    transient; timeouts, connection errors and anything unknown are transient.
    """
    seen = set()
    e: Optional[BaseException] = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, PermanentError):
            return "permanent"
        if isinstance(e, TransientError):
            return "transient"
        status = _status_of(e)
        if status is not None and status >= 400:
            return "permanent" if status in PERMANENT_STATUS else "transient"
        if isinstance(e, (TimeoutError, socket.timeout, ConnectionError, urllib.error.URLError)):
            return "transient"
        e = e.__cause__ or e.__context__
    return "transient"
