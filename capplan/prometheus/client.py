"""The HTTP side of a Prometheus pull: one ``/api/v1/query_range`` request, retried.

* **Credentials and tenant headers** come from the environment or files only
  (``bearer_token_env``, ``basic_auth.password_env``, ``headers: {Name: {env|file}}``);
  every value is treated as a secret and scrubbed from any message
  (:meth:`PrometheusClient.scrub`).
* **Retries** with exponential backoff (tenacity) on timeouts, connection
  errors, HTTP 5xx and 429: ``prometheus.retries`` (4) retries, first wait
  ``prometheus.backoff_s`` (1 s), doubling, capped at 30 s.
* **timeout_s is a deadline for the whole request** (connect, headers and the
  body), not only for each read.
* **Partial answers** (Thanos, Cortex/Mimir): the request carries
  ``partial_response=false`` unless ``prometheus.partial_response: true``
  (Thanos Query API, https://thanos.io/tip/components/query.md/#partial-response);
  any ``warnings`` (or ``infos``) of a 200 answer are returned with the result,
  never dropped (:class:`Answer`).
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import requests
import tenacity
import urllib3

from capplan.config.prometheus import PrometheusConfig
from capplan.errors import InputError, SourceError, looks_like_name

_HEADER_NAME_RE = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
"""An HTTP header field name (RFC 9110 token)."""
_RESERVED_HEADERS = frozenset({"authorization", "proxy-authorization", "host", "content-length", "cookie"})


class PrometheusError(SourceError):
    """A request failed for good. ``status`` is the HTTP status (None: no response);
    ``bad_input`` is True for 4xx (a bad query or refused credentials): exit code 2."""

    def __init__(self, message: str, status: int | None = None, bad_input: bool | None = None,
                 reason: str | None = None):
        super().__init__(message)
        self.status = status
        self.bad_input = (status is not None and 400 <= status < 500 and status != 429) if bad_input is None \
            else bad_input
        self.reason = reason or message  # the cause alone (no series or query), scrubbed


class _Transient(Exception):
    """A failure worth retrying (timeout, connection error, 5xx, 429); ``connect``: nothing answered
    the connection (refused, no route, unknown host)."""

    def __init__(self, message: str, status: int | None = None, connect: bool = False):
        super().__init__(message)
        self.status = status
        self.connect = connect



@dataclass
class Answer:
    """A 200 ``query_range`` answer: ``result`` (``data.result``), ``result_type``
    (``data.resultType``: matrix, vector, scalar or string), the ``warnings``/``infos``
    strings the server attached (a Thanos or Mimir partial answer says so there), and
    ``redirected_to``: the origin that answered when the configured URL redirected to another one
    (secret headers and credentials were not sent there, :class:`_DeadlineSession`)."""

    result: object
    result_type: str | None
    warnings: list[str] = field(default_factory=list)
    redirected_to: str | None = None  # the other origin (scheme://host:port) that answered after a redirect


# -- the client ------------------------------------------------------------------------
def _prom_error_text(body: bytes) -> str:
    """Prometheus' own error text (``errorType: error``) from a response body, else the body's start."""
    text = body.decode("utf-8", "replace")
    try:
        doc = json.loads(text)
        if isinstance(doc, dict) and "error" in doc:
            return f"{doc.get('errorType', 'error')}: {doc['error']}"
    except ValueError:
        pass
    return text.strip()[:500] or "(empty body)"


class _DeadlineSession(requests.Session):
    """A session whose requests must complete, body included, within ``deadline_s``.

    ``requests``' own timeout bounds each socket read, so a server sending one
    byte a second never times out; here the body is read in chunks and the
    request fails with :class:`requests.Timeout` once the deadline passes.
    """

    def __init__(self, deadline_s: float):
        super().__init__()
        self.deadline_s = deadline_s
        self.secret_headers: frozenset[str] = frozenset()  # lower-case names of the configured secret headers

    def rebuild_auth(self, prepared_request, response):
        """On a redirect to another origin (host, port or scheme: ``requests``' ``should_strip_auth``), drop
        the secret headers (tenant ids such as ``X-Scope-OrgID``) as ``requests`` drops ``Authorization``:
        a secret goes only to the origin it was configured for."""
        super().rebuild_auth(prepared_request, response)
        if self.should_strip_auth(response.request.url, prepared_request.url):
            for name in [h for h in prepared_request.headers if h.lower() in self.secret_headers]:
                del prepared_request.headers[name]

    def request(self, method, url, **kw):
        end = time.monotonic() + self.deadline_s
        kw["stream"] = True
        resp = super().request(method, url, **kw)
        chunks = []
        try:
            while True:  # read1: whatever has arrived (read(n) would wait for n bytes of a trickle)
                try:
                    chunk = resp.raw.read1(65536, decode_content=True)
                except urllib3.exceptions.ReadTimeoutError:
                    raise requests.Timeout(f"timed out: no byte within {self.deadline_s:g} s") from None
                except urllib3.exceptions.HTTPError as exc:
                    raise requests.ConnectionError(str(exc)) from None
                if not chunk:
                    break
                chunks.append(chunk)
                if time.monotonic() > end:
                    raise requests.Timeout(f"timed out: no complete answer within {self.deadline_s:g} s")
        finally:
            resp.close()
        resp._content = b"".join(chunks)
        resp._content_consumed = True
        return resp


def _timed_out(exc: BaseException) -> bool:
    """True when a ``requests`` error is a timeout in disguise (a read timeout
    while streaming the body surfaces as ConnectionError)."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (requests.Timeout, TimeoutError)) or "timed out" in str(e).lower():
            return True
        e = e.__cause__ or e.__context__ or (e.args[0] if e.args and isinstance(e.args[0], BaseException) else None)
    return False


_AUTH_HEADER_RE = re.compile(r"(?i)((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
                             r"(?:[a-z]+ +)?[A-Za-z0-9+/=._~%:-]+")
"""An echoed ``Authorization: <scheme> <credentials>`` (or ``"authorization": "..."``) value."""


def _credential(env, name: str, key: str, token: bool) -> str:
    """The credential in environment variable ``name`` (config key ``key`` names it), without
    a trailing newline (a secret mounted from a file often ends in one). A bearer token
    (``token``) also loses surrounding whitespace and may hold none inside; a basic-auth
    password may (it travels base64-encoded).

    Raises InputError when the variable is unset or empty, or a token holds whitespace or
    control characters inside (an HTTP header cannot carry them); the message never shows
    the value."""
    raw = env.get(name, "")
    val = raw.strip() if token else raw.rstrip("\r\n")
    if not val:
        named = f"environment variable {name}" if looks_like_name(name) else (
            "the environment variable it names (the name is not shown: it does not look like a variable name; "
            "put the variable's name there, not the secret)")
        raise InputError(f"{key}: {named} is not set" + (" (only whitespace)" if raw else ""))
    if token and any(c.isspace() or not c.isprintable() for c in val):
        raise InputError(f"{key}: environment variable {name} holds whitespace or control characters inside "
                         "the token; an HTTP header cannot carry them (check how the secret was created)")
    return val



def _header_value(env, name: str, spec) -> str:
    """The value of extra header ``name`` from ``spec`` (env or file), checked.

    Raises InputError naming the header (never its value) when the variable is unset,
    the file unreadable, or the value empty or holding control characters."""
    key = f"prometheus.headers.{name}"
    if spec.env:
        return _credential(env, spec.env, f"{key}.env", token=True)
    try:
        raw = Path(spec.file).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{key}.file: {spec.file}: cannot read ({exc.strerror or exc})") from None
    val = raw.strip()
    if not val or any(not c.isprintable() for c in val):
        raise InputError(f"{key}.file: {spec.file}: empty or holds control characters (an HTTP header cannot "
                         "carry them)")
    return val


class PrometheusClient:
    """One Prometheus-compatible endpoint (Prometheus, VictoriaMetrics, Thanos, Mimir,
    Cortex), configured from ``prometheus:`` of the config.

    Credentials come from the environment only: the bearer token from the
    variable named by ``bearer_token_env``, the basic-auth password from
    ``basic_auth.password_env``; extra ``headers`` (tenant ids) from env or files.
    TLS is verified (with ``ca_file`` if set) unless ``verify_tls: false``.

    Raises InputError when a named environment variable is unset or empty, a
    header file is unreadable or a header name is not an HTTP token.
    """

    def __init__(self, cfg: PrometheusConfig, env: dict | None = None, retry_connect: bool = True,
                 on_retry: Callable[[str], None] | None = None):
        """``retry_connect=False``: a connection nothing answers (refused, unknown host) fails at once
        instead of being retried (an interactive command says so at once); ``on_retry(line)`` is told
        before each retry's wait (``capplan discover``'s progress)."""
        env = os.environ if env is None else env
        self.cfg = cfg
        self.retry_connect = retry_connect
        self.on_retry = on_retry
        self._secrets: list[str] = []
        headers, auth = {}, None
        for name, spec in (cfg.headers or {}).items():
            if not _HEADER_NAME_RE.match(name) or name.lower() in _RESERVED_HEADERS:
                raise InputError(f"prometheus.headers: {name!r} is not an allowed header name (an HTTP token; "
                                 "Authorization goes in bearer_token_env or basic_auth)")
            headers[name] = _header_value(env, name, spec)
            self._secrets.append(headers[name])
        if cfg.bearer_token_env:
            tok = _credential(env, cfg.bearer_token_env, "prometheus.bearer_token_env", token=True)
            headers["Authorization"] = f"Bearer {tok}"
            self._secrets += [f"Bearer {tok}", tok]
        if cfg.basic_auth:
            pw = _credential(env, cfg.basic_auth.password_env, "prometheus.basic_auth.password_env", token=False)
            auth = (cfg.basic_auth.username, pw)
            b64 = base64.b64encode(f"{cfg.basic_auth.username}:{pw}".encode("utf-8")).decode("ascii")
            self._secrets += [f"Basic {b64}", b64, pw]
        session = _DeadlineSession(cfg.timeout_s)
        if cfg.ca_file:
            if not os.path.isfile(cfg.ca_file):
                raise InputError(f"prometheus.ca_file: {cfg.ca_file}: file not found")
            session.verify = cfg.ca_file
        else:
            session.verify = bool(cfg.verify_tls)
        session.headers.update(headers)
        session.secret_headers = frozenset(h.lower() for h in headers)
        session.auth = auth
        self._session = session
        self._url = cfg.url.rstrip("/") + "/api/v1/query_range"
        #: the other origins that answered after a redirect (their answers were used; no secret was sent there)
        self.answered_by: set[str] = set()
        creds = (f"bearer token from ${cfg.bearer_token_env}" if cfg.bearer_token_env else
                 f"basic auth as {cfg.basic_auth.username!r} with password from ${cfg.basic_auth.password_env}"
                 if cfg.basic_auth else "")
        tenant = ", ".join(f"{k} from " + (f"${v.env}" if v.env else v.file) for k, v in cfg.headers.items())
        self._auth_hint = " and ".join(x for x in (creds, f"headers {tenant}" if tenant else "") if x) or (
            "no credentials or headers are configured: set prometheus.bearer_token_env or basic_auth, and for a "
            "multi-tenant store (Grafana Mimir, Cortex) prometheus.headers: {X-Scope-OrgID: {env: VAR}}")

    def close(self) -> None:
        self._session.close()

    def scrub(self, text: str) -> str:
        """``text`` with every credential and header value replaced by ``***``: the bearer
        token, the basic-auth password and the base64 of ``user:password`` (whole header
        values first, each also as Python's repr escapes it), tenant header values, and any
        echoed ``Authorization: ...`` header value whatever it holds."""
        for s in sorted(self._secrets, key=len, reverse=True):
            for form in dict.fromkeys((s, repr(s)[1:-1])):
                if form:
                    text = text.replace(form, "***")
        return _AUTH_HEADER_RE.sub(r"\1***", text)

    def _once(self, query: str, start_s: int, end_s: int, step_s: int) -> Answer:
        params = {"query": query, "start": str(start_s), "end": str(end_s), "step": str(step_s),
                  "timeout": f"{self.cfg.timeout_s:g}s"}
        if not self.cfg.partial_response:
            params["partial_response"] = "false"
        try:
            # verify passed explicitly: requests lets REQUESTS_CA_BUNDLE override a session's own verify
            resp = self._session.get(self._url, params=params, timeout=self.cfg.timeout_s, verify=self._session.verify)
        except requests.Timeout:
            raise _Transient(f"timed out: no complete answer within timeout_s={self.cfg.timeout_s:g} s") from None
        except requests.exceptions.SSLError:
            raise PrometheusError("TLS verification failed (SSLError); set prometheus.ca_file to the "
                                  "server's CA bundle", bad_input=True) from None
        except requests.ConnectionError as exc:
            if _timed_out(exc):
                raise _Transient(f"timed out: no complete answer within timeout_s={self.cfg.timeout_s:g} s") from None
            reason = str(exc.args[0]) if exc.args else ""
            reason = re.sub(r".*\] ", "", reason.split("(Caused by ")[-1]).rstrip(")'\"") if reason else ""
            raise _Transient(f"cannot connect ({reason or type(exc).__name__})", connect=True) from None
        status = resp.status_code
        if status != 200:
            text = _prom_error_text(resp.content)
            if status >= 500 or status == 429:
                raise _Transient(f"HTTP {status}: {text}", status)
            raise PrometheusError(text, status)
        try:
            doc = json.loads(resp.content)
        except ValueError as exc:  # a body that is not JSON (a proxy's error page)
            raise _Transient(f"the answer is not Prometheus JSON ({exc})") from None
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, dict) or "result" not in data:
            raise PrometheusError("Prometheus answered 200 without data.result (not a query_range answer; "
                                  "is the URL a Prometheus server?)", bad_input=False)
        notes = [str(w) for key in ("warnings", "infos") if isinstance(doc.get(key), list) for w in doc[key]]
        moved = None
        if resp.history and self._session.should_strip_auth(self._url, resp.url):  # another origin answered
            u = urllib3.util.parse_url(resp.url)
            moved = f"{u.scheme}://{u.host}" + (f":{u.port}" if u.port else "")
            self.answered_by.add(moved)
        return Answer(data["result"], data.get("resultType"), notes, moved)

    def query_range(self, query: str, start_s: int, end_s: int, step_s: int, *, series_id: str = "?") -> Answer:
        """``/api/v1/query_range`` answer (:class:`Answer`), retried on transient failures.

        Raises PrometheusError naming the series id, the query and the server's
        error text (4xx at once; others after the retries); on 401/403 the
        message says which credentials and headers were sent (names, never values).
        """
        what = f"series {series_id}: query {query!r}"

        def told(state: tenacity.RetryCallState) -> None:
            if self.on_retry is not None:
                self.on_retry(self.scrub(f"Prometheus at {self.cfg.url}: {state.outcome.exception()}; retry "
                                         f"{state.attempt_number} of {self.cfg.retries} in "
                                         f"{state.next_action.sleep:.0f} s"))

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.cfg.retries + 1),
            wait=tenacity.wait_exponential(multiplier=self.cfg.backoff_s, min=self.cfg.backoff_s, max=30),
            retry=tenacity.retry_if_exception(
                lambda e: isinstance(e, _Transient) and (self.retry_connect or not e.connect)),
            before_sleep=told, reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(query, start_s, end_s, step_s)
        except _Transient as exc:
            n = retrying.statistics.get("attempt_number", self.cfg.retries + 1)
            raise PrometheusError(self.scrub(
                f"{what}: Prometheus at {self.cfg.url} failed after {n} attempt(s): {exc}"),
                exc.status, reason=self.scrub(str(exc))) from None
        except PrometheusError as exc:
            if exc.status is None:
                msg = f"{what}: Prometheus at {self.cfg.url}: {exc}"
            elif exc.status in (401, 403):
                msg = (f"{what}: Prometheus at {self.cfg.url} refused the credentials (HTTP {exc.status}: {exc}); "
                       f"sent: {self._auth_hint}")
            else:
                msg = f"{what}: Prometheus at {self.cfg.url} rejected the request (HTTP {exc.status}): {exc}"
            raise PrometheusError(self.scrub(msg), exc.status, exc.bad_input,
                                  reason=self.scrub(msg.split(f"Prometheus at {self.cfg.url}", 1)[-1].lstrip(": "))
                                  ) from None
        raise AssertionError("unreachable")
