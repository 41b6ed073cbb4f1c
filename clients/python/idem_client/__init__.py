"""Python client of idem's HTTP API, standard library only.

``Client`` talks to an idem server (``check``, ``complete``, ``fail``,
``renew``, ``record``, ``workflow``); ``Client.guard`` wraps one
side-effecting tool call as a decorator or a context manager: check, then
run it and record its outcome, or hand back the earlier call's recorded
result. Errors from the server are ``APIError`` subclasses carrying the
problem document's fields (status, title, detail, field).
"""

from .client import Client, Decision, Match, Record, Workflow
from .errors import (
    APIError,
    AuthError,
    BadRequestError,
    ConfirmError,
    ConflictError,
    FailedBeforeError,
    FlaggedError,
    IdemError,
    InProgressError,
    NotFoundError,
    NotRecordedError,
    PermanentError,
    ServerError,
    TransientError,
    TransportError,
    UnavailableError,
    UncertainError,
    classify,
)
from .guard import Guard

__all__ = [
    "APIError",
    "AuthError",
    "BadRequestError",
    "Client",
    "ConfirmError",
    "ConflictError",
    "Decision",
    "FailedBeforeError",
    "FlaggedError",
    "Guard",
    "IdemError",
    "InProgressError",
    "Match",
    "NotFoundError",
    "NotRecordedError",
    "PermanentError",
    "Record",
    "ServerError",
    "TransientError",
    "TransportError",
    "UnavailableError",
    "UncertainError",
    "Workflow",
    "classify",
]
