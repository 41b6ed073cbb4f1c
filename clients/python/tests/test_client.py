"""The Python client against a real ``idem serve`` (see server.py)."""

from __future__ import annotations

import os
import re
import unittest
import uuid
from typing import Any, Dict, List

import idem_client
from idem_client import (
    AuthError,
    BadRequestError,
    Client,
    ConfirmError,
    FailedBeforeError,
    NotFoundError,
    PermanentError,
    TransientError,
)

from .server import REPO, Server

SERVER = Server()


def setUpModule() -> None:
    SERVER.start()


def tearDownModule() -> None:
    SERVER.stop()


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class HTTPError(Exception):
    """An HTTP client library's error, as requests and httpx raise them: it carries a status."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP {status_code}")
        self.status_code = status_code


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.idem = Client(SERVER.url, api_key=SERVER.api_key, wait=0.2)
        self.session = fresh("chat")
        self.run_id = fresh("run")

    def check(self, step: str, tool: str = "send_email", **args: Any) -> idem_client.Decision:
        return self.idem.check(
            session_id=self.session, workflow_id=self.run_id, step_id=step, tool=tool, arguments=args
        )

    def test_check_complete_then_duplicate(self) -> None:
        d = self.check("1", to="ann@example.com", subject="Invoice", body="Your invoice is attached.")
        self.assertEqual(d.decision, "execute")
        self.assertEqual(d.key, f"{self.run_id}:1:send_email")
        self.assertTrue(d.token)
        rec = self.idem.complete(d.key, d.token, {"message_id": "m-1"})
        self.assertEqual(rec.status, "SUCCESS")
        again = self.check("1", to="ann@example.com", subject="Invoice", body="Your invoice is attached.")
        self.assertEqual(again.decision, "duplicate")
        self.assertTrue(again.replayed)
        self.assertEqual(again.match.result, {"message_id": "m-1"})
        self.assertEqual(self.idem.record(d.key).result, {"message_id": "m-1"})
        wf = self.idem.workflow(self.run_id)
        self.assertEqual([s.key for s in wf.steps], [d.key])

    def test_fail_transient_runs_again_permanent_replays(self) -> None:
        d = self.check("1", to="bo@example.com", subject="Hi", body="hello")
        self.idem.fail(d.key, d.token, {"error": "timeout"}, transient=True)
        again = self.check("1", to="bo@example.com", subject="Hi", body="hello")
        self.assertEqual(again.decision, "execute", "a transient failure lets the key run again")
        self.idem.fail(again.key, again.token, {"error": "no such mailbox"}, transient=False)
        third = self.check("1", to="bo@example.com", subject="Hi", body="hello")
        self.assertEqual(third.decision, "duplicate")
        self.assertEqual(third.match.status, "FAILED")
        self.assertEqual(third.match.error, {"error": "no such mailbox"})

    def test_renew(self) -> None:
        d = self.check("1", to="cy@example.com", subject="Long job", body="exporting")
        before = self.idem.record(d.key).lease_until_ms
        try:
            rec = self.idem.renew(d.key, d.token, "10m")
        except NotFoundError as e:
            if "no such endpoint" in e.detail:
                self.skipTest("this idem has no POST /v1/renew yet (issue #19): " + e.detail)
            raise
        self.assertEqual(rec.status, "PENDING")
        self.assertGreater(self.idem.record(d.key).lease_until_ms, before)
        rec = self.idem.renew(d.key, d.token, 15 * 60 * 1000)  # milliseconds
        self.assertEqual(rec.status, "PENDING")
        with self.assertRaises(idem_client.ConflictError) as cm:
            self.idem.renew(d.key, "not-the-token", "10m")
        self.assertEqual(cm.exception.field, "token")

    def test_problem_json_names_the_field(self) -> None:
        with self.assertRaises(BadRequestError) as cm:
            self.idem.check(session_id="", tool="send_email", arguments={"to": "a@example.com"})
        e = cm.exception
        self.assertEqual(e.status, 400)
        self.assertIn("session_id", e.detail)
        self.assertIn("session_id", str(e))
        with self.assertRaises(BadRequestError) as cm:
            self.idem.check(session_id=self.session, workflow_id="w", step_id="1", tool="t",
                            arguments={"items": [{"sku": 1}], "note": {"x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}})
        self.assertEqual(cm.exception.status, 400)
        self.assertTrue((cm.exception.field or "").startswith("arguments"), cm.exception)
        self.assertIn(cm.exception.field, cm.exception.detail)
        with self.assertRaises(NotFoundError) as cm:
            self.idem.record(fresh("never-claimed"))
        self.assertEqual(cm.exception.field, "key")

    def test_auth_errors(self) -> None:
        for key in (None, "idem_WRONGWRONGWRONGWRONGWRONGWRONG"):
            with self.subTest(key=key):
                with self.assertRaises(AuthError) as cm:
                    Client(SERVER.url, api_key=key).check(session_id="s", tool="t", idempotency_key="k", arguments={})
                self.assertEqual(cm.exception.status, 401)
                self.assertEqual(cm.exception.field, "Authorization")

    def test_guard_duplicate_replayed_without_running(self) -> None:
        runs: List[Dict[str, Any]] = []

        @self.idem.guard(session_id=self.session, workflow_id=self.run_id, step_id="7", tool="create_invoice")
        def create_invoice(customer: str, amount: int, idem_key: str = "") -> Dict[str, Any]:
            runs.append({"customer": customer, "key": idem_key})
            return {"invoice": "inv-1", "amount": amount}

        self.assertEqual(create_invoice("acme", amount=120), {"invoice": "inv-1", "amount": 120})
        self.assertEqual(create_invoice("acme", amount=120), {"invoice": "inv-1", "amount": 120})
        self.assertEqual(len(runs), 1, "the duplicate ran the function")
        self.assertEqual(runs[0]["key"], f"{self.run_id}:7:create_invoice", "the function got the key")

    def test_guard_transient_failure_runs_again(self) -> None:
        attempts: List[int] = []

        def charge() -> Dict[str, Any]:
            attempts.append(1)
            if len(attempts) == 1:
                raise HTTPError(503)
            return {"charge": "ch-1"}

        guard = lambda: self.idem.guard(  # noqa: E731
            session_id=self.session, workflow_id=self.run_id, step_id="2", tool="charge_card",
            arguments={"card": "4242", "amount": 30},
        )
        with self.assertRaises(HTTPError):
            with guard() as call:
                if call.should_run:
                    call.result = charge()
        self.assertEqual(self.idem.record(f"{self.run_id}:2:charge_card").error_class, "transient")
        with guard() as call:
            if call.should_run:
                call.result = charge()
        self.assertEqual(call.result, {"charge": "ch-1"})
        self.assertEqual(len(attempts), 2)

    def test_guard_permanent_failure_replayed(self) -> None:
        attempts: List[int] = []

        @self.idem.guard(session_id=self.session, workflow_id=self.run_id, step_id="3", tool="refund")
        def refund(order: str) -> Dict[str, Any]:
            attempts.append(1)
            raise PermanentError(f"order {order} was never paid")

        with self.assertRaises(PermanentError):
            refund("o-9")
        self.assertEqual(self.idem.record(f"{self.run_id}:3:refund").error_class, "permanent")
        with self.assertRaises(FailedBeforeError) as cm:
            refund("o-9")
        self.assertEqual(len(attempts), 1, "a permanent failure ran again")
        self.assertIn("never paid", str(cm.exception))

    def test_guard_confirm_is_written_for_the_model(self) -> None:
        ran: List[int] = []

        def send(step: str, body: str) -> None:
            with self.idem.guard(
                session_id=self.session, workflow_id=self.run_id, step_id=step, tool="send_email",
                arguments={"to": "ann@example.com", "subject": "Your invoice", "body": body},
            ) as call:
                if call.should_run:
                    ran.append(1)
                    call.result = {"message_id": f"m-{step}"}

        send("1", "Hello Ann, your March invoice is attached.")
        with self.assertRaises(ConfirmError) as cm:
            send("2", "Hello Ann, your invoice for March is attached.")
        self.assertEqual(len(ran), 1)
        msg = str(cm.exception)
        self.assertIn("very similar call already ran", msg)
        self.assertIn("not run", msg)
        self.assertEqual(cm.exception.decision.match.key, f"{self.run_id}:1:send_email")

    def test_confirmed_execution_names_the_earlier_call_in_its_record(self) -> None:
        first = self.check("1", to="ann@example.com", subject="Your invoice", body="Hello Ann, your March invoice is attached.")
        self.idem.complete(first.key, first.token, {"message_id": "m-1"})
        near = {"to": "ann@example.com", "subject": "Your invoice", "body": "Hello Ann, your invoice for March is attached."}
        asked = self.check("2", **near)
        self.assertEqual(asked.decision, "confirm")
        d = self.idem.check(
            session_id=self.session, workflow_id=self.run_id, step_id="2", tool="send_email",
            arguments=near, confirmed=asked.match.key,
        )
        self.assertEqual(d.decision, "execute")
        rec = self.idem.complete(d.key, d.token, {"message_id": "m-2"})
        self.assertEqual(rec.confirmed, first.key)
        self.assertEqual(self.idem.record(d.key).confirmed, first.key)
        self.assertEqual(self.idem.record(first.key).confirmed, "")

    def test_classify(self) -> None:
        cases = [
            (HTTPError(404), "permanent"),
            (HTTPError(429), "transient"),
            (HTTPError(418), "transient"),
            (TimeoutError("slow"), "transient"),
            (ValueError("unknown"), "transient"),
            (PermanentError("no"), "permanent"),
        ]
        for exc, want in cases:
            with self.subTest(exc=exc):
                self.assertEqual(idem_client.classify(exc), want)
        try:
            try:
                raise HTTPError(503)
            except HTTPError as inner:
                raise PermanentError("gave up") from inner
        except PermanentError as outer:
            self.assertEqual(idem_client.classify(outer), "permanent")


class ReadmeExampleTest(unittest.TestCase):
    """The README's Python section, run as written against the test server."""

    def test_agent_loop_example(self) -> None:
        with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
            readme = f.read()
        m = re.search(r"<!-- python-agent-example -->\s*```python\n(.*?)```", readme, re.S)
        self.assertIsNotNone(m, "README.md has no python-agent-example block")
        os.environ["IDEM_URL"] = SERVER.url
        os.environ["IDEM_API_KEY"] = SERVER.api_key
        scope: Dict[str, Any] = {"__name__": "readme_example"}
        exec(compile(m.group(1), "README.md", "exec"), scope)
        messages = scope["messages"]
        # Two tool calls, the second a retry of the first: one email sent,
        # both answered with its result.
        self.assertEqual(scope["sent"], 1)
        tool_msgs = [m for m in messages if m["role"] == "tool"]
        self.assertEqual(len(tool_msgs), 3)
        self.assertEqual(tool_msgs[0]["content"], tool_msgs[1]["content"])
        self.assertIn("message_id", tool_msgs[0]["content"])
        self.assertIn("very similar call already ran", tool_msgs[2]["content"])


if __name__ == "__main__":
    unittest.main()
