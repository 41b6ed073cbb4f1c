"""Guard: check, then run the call and record its outcome, or hand back the earlier call's.

The rules are those of the Go client's ``Client.Guard``:

- execute: the function runs (with the call's key, to pass downstream), then
  its return value is recorded (``complete``) or its exception (``fail``),
  classed transient or permanent by ``classify``; the exception is re-raised
  as it was.
- duplicate: the function does not run; the earlier call's recorded result is
  returned (for a permanent failure, ``FailedBeforeError``).
- in_progress: the server waits (``Client.wait``) for the twin in flight and
  the guard checks again, up to ``Client.max_in_progress`` times, then raises
  ``InProgressError``.
- confirm, uncertain: the function does not run; ``ConfirmError`` or
  ``UncertainError`` says why, for the model.
"""

from __future__ import annotations

import functools
import inspect
import json
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Type, TypeVar

from .client import CONFIRM, DUPLICATE, EXECUTE, IN_PROGRESS, UNCERTAIN, Decision
from .errors import (
    ConfirmError,
    FailedBeforeError,
    IdemError,
    InProgressError,
    NotRecordedError,
    UncertainError,
    classify,
)

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

F = TypeVar("F", bound=Callable[..., Any])

#: The keyword a guarded function may declare to receive the call's key.
KEY_PARAMETER = "idem_key"


class Guard:
    """One guarded call. Made by ``Client.guard``.

    As a context manager::

        with idem.guard(session_id=s, tool="send_email", arguments=args, workflow_id=run, step_id="3") as call:
            if call.should_run:
                call.result = send_email(**args, idempotency_key=call.key)
        reply(call.result)          # fresh, or the earlier call's

    Entering checks: a flagged decision raises (``ConfirmError``, ...), a
    duplicate sets ``result`` and ``should_run`` False, an execute sets
    ``should_run`` True. Leaving records ``result`` (or the exception that left
    the block, which then propagates).

    As a decorator the arguments come from the call (keyword arguments, and
    positional ones by their parameter names) unless given to ``guard``; a
    function declaring ``idem_key`` receives the key::

        @idem.guard(session_id=s, tool="send_email", workflow_id=run, step_id="3")
        def send_email(to, subject, body, idem_key=None): ...
    """

    def __init__(self, client: "Client", check: Dict[str, Any]) -> None:
        self._client = client
        self._check = check
        self.decision: Optional[Decision] = None
        self.result: Any = None
        self.should_run = False
        self._entered = False

    @property
    def key(self) -> str:
        """The call's ledger key (pass it downstream as the tool's idempotency key)."""
        return self.decision.key if self.decision else ""

    # -- context manager ---------------------------------------------------

    def __enter__(self) -> "Guard":
        if self._entered:
            raise RuntimeError("a Guard guards one call: make a new one with Client.guard")
        self._entered = True
        d = self._decide(self._check)
        if d.decision == EXECUTE:
            self.should_run = True
        else:
            self.result = _replayed(d)
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        if not self.should_run or self.decision is None:
            return False
        d = self.decision
        if exc is not None:
            self._record_failure(d, exc)
            return False  # the exception propagates as it was
        self._record_result(d, self.result)
        return False

    # -- decorator ---------------------------------------------------------

    def __call__(self, fn: F) -> F:
        sig = inspect.signature(fn)
        wants_key = KEY_PARAMETER in sig.parameters

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            check = dict(self._check)
            if check.get("arguments") is None:
                bound = sig.bind_partial(*args, **kwargs)
                check["arguments"] = {k: v for k, v in bound.arguments.items() if k != KEY_PARAMETER}
            g = Guard(self._client, check)
            with g as call:
                if call.should_run:
                    if wants_key:
                        kwargs[KEY_PARAMETER] = call.key
                    call.result = fn(*args, **kwargs)
            return g.result

        return wrapper  # type: ignore[return-value]

    # -- the rules ---------------------------------------------------------

    def _decide(self, check: Dict[str, Any]) -> Decision:
        c = self._client
        d: Optional[Decision] = None
        for _ in range(c.max_in_progress):
            d = c.check(wait_ms=int(c.wait * 1000), **check)
            if d.decision != IN_PROGRESS:
                break
        assert d is not None
        self.decision = d
        if d.decision in (EXECUTE, DUPLICATE):
            if d.decision == DUPLICATE and d.match is not None and d.match.status == "FAILED":
                raise FailedBeforeError(d)
            return d
        if d.decision == IN_PROGRESS:
            raise InProgressError(d)
        if d.decision == CONFIRM:
            raise ConfirmError(d)
        if d.decision == UNCERTAIN:
            raise UncertainError(d)
        raise IdemError(f"idem: unknown decision {d.decision!r}")

    def _record_result(self, d: Decision, result: Any) -> None:
        try:
            json.dumps(result)
        except (TypeError, ValueError) as e:
            raise NotRecordedError(f"idem: the call ran but its result is not JSON: {e}", result) from e
        try:
            self._client.complete(d.key, d.token, result)
        except IdemError as e:
            raise NotRecordedError(f"idem: the call ran but its outcome was not recorded: {e}", result) from e

    def _record_failure(self, d: Decision, exc: BaseException) -> None:
        cls = classify(exc)
        error = {"error": str(exc) or type(exc).__name__, "class": cls}
        try:
            self._client.fail(d.key, d.token, error, transient=cls != "permanent")
        except IdemError as e:
            raise NotRecordedError(f"idem: the call failed ({exc}) and its failure was not recorded: {e}") from exc


def _replayed(d: Decision) -> Any:
    if d.match is None:
        return None
    return d.match.result
