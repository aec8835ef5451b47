"""The worker's report to the Verifier: numbered records on a pipe the Verifier drains, not a file in
the run folder.

The worker used to save its verdict to result.json in the run folder, and the Verifier read it back
once the worker exited. That file was the candidate's to rewrite: a thread of its, a finaliser run
after the last save, or a function it rebound (os.replace, json.dumps, dataclasses.asdict) could
have put its own timings and findings there, and they would have been read as the worker's. Here:

- each record is written once to a pipe, and what is written cannot be taken back;
- each record is signed (HMAC-SHA256) with a key the Verifier hands the worker on its stdin before
  the candidate is imported, and numbered in order, the worker's last one saying so: a record
  without the key's signature, out of sequence, or after the last was not the worker's
  (`Reader.problems`);
- the worker turns its verdict into plain data and writes it through functions bound when this
  module is imported, before the candidate is (C's JSON encoder, os.write), so rebinding a
  module's names reaches nothing here;
- what a record once said stands: a later record cannot take back a finding, undo a status of
  'hacked', or change a timing already reported (`Reader.merged`).

Code the candidate runs in the worker's process can still write to the pipe: what it writes shows.
To sign a record it would need the key, or to change what the worker signs, and both live in the
worker's own objects; the audit hook refuses the candidate's Python ways to them (the garbage
collector's lists, frames, a function's code or defaults, a trace function, the interpreter's C API
through ctypes: audit.py's sandbox-introspect). What this does not stop, said plainly (a red-team
review, 2026-11-30): the candidate's native code calling Python's C API itself, a signal handler's
frame, and whatever else in the process hands over a frame unaudited. The worker cannot keep a
secret from code running inside it: outputs are re-judged outside it (the blind check), timings
are not. Timing in a process the candidate never runs in is the structural fix, not yet built.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

from stitchcuda.types import Finding, Verdict

FINAL = "done"  # the phase of the worker's last record
MAX_RECORD = 32 << 20  # bytes: a verdict with its logs is far less; more is not the worker's
FORGED = "report-forged"  # the finding a record the worker did not write becomes
# A verdict's fields a later record may not change once a record has reported them.
FIXED_ONCE_SET = ("eager", "ours", "ours_gpu")

# Bound now, before any candidate is imported (the worker imports this module first): the builtins
# too, which a candidate can rebind for every module at once (builtins.len).
_encode = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
    None, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
try:
    from _hashlib import hmac_digest as _hmac_digest  # OpenSSL's, in C
except ImportError:  # (a Python built without OpenSSL)
    _hmac_digest = hmac.digest
KEY_BYTES = 32


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def sign(key: bytes, body: bytes, _digest=_hmac_digest) -> str:
    return _digest(key, body, "sha256").hex()


FOREIGN = "\0foreign"  # a container of a type the worker never puts in a verdict


def plain(value: Any, _self: Any = None, _plain_types: tuple = (type(None), bool, int, float, str), _type=type,
          _str=str, _getattr=getattr, _isinstance=isinstance, _get=object.__getattribute__, _items=dict.items,
          _foreign=FOREIGN) -> Any:
    """`value` as JSON's plain types, read through the builtin types' own methods: a dataclass by its
    declared fields, exact lists, tuples and dicts item by item, anything else as its str(). A list
    or dict of a subclass (one whose methods were replaced) is not read through its methods: it is
    reported as what it is, for the Verifier to see. Everything it calls is bound in its defaults,
    a tuple (no module name, closure cell or dict a candidate could change in place; replacing the
    tuple is audited). It recurses through `_self`, the function its caller bound (Sender.verdict):
    the module's name `plain` is only the fallback of a call without one."""
    me = _self or plain
    t = _type(value)
    if t in _plain_types:
        return value
    if t is list or t is tuple:
        return [me(x, me) for x in value]
    if t is dict:
        return {_str(k): me(v, me) for k, v in _items(value)}
    fields = _getattr(t, "__dataclass_fields__", None)
    if _type(fields) is dict:
        return {name: me(_get(value, name), me) for name in fields}
    if _isinstance(value, list | tuple | dict):
        return {_foreign: f"{t.__module__}.{t.__qualname__}"}
    return _str(value)


def has_foreign(value: Any) -> bool:
    """Whether plain() found a container of a type the worker never puts in a verdict."""
    if isinstance(value, dict):
        return FOREIGN in value or any(has_foreign(v) for v in value.values())
    if isinstance(value, list):
        return any(has_foreign(v) for v in value)
    return False


class Sender:
    """The worker's end: one JSON line a record, numbered from 1."""

    def __init__(self, fd: int | None, key: bytes = b""):
        self.fd = fd
        self.seq = 0
        self._key = key
        if fd is not None:
            # The builds and profilers the worker starts must not hold the pipe open past its exit.
            os.set_inheritable(fd, False)

    def send(self, kind: str, body: dict[str, Any], _encode=_encode, _join="".join, _write=os.write, _len=len,
             _view=memoryview, _sign=sign) -> None:
        if self.fd is None:
            return
        self.seq += 1
        text = _join(_encode({"seq": self.seq, "kind": kind, **body}, 0)).encode()
        data = _sign(self._key, text).encode() + b"\t" + text + b"\n"
        view = _view(data)
        while _len(view):
            view = view[_write(self.fd, view):]

    def verdict(self, v: Verdict, phase: str, _plain=plain, _type=type, _verdict_type=Verdict) -> None:
        d = _plain(v, _plain)
        if _type(v) is not _verdict_type:  # (its class swapped for one of the candidate's)
            d = {**d, FOREIGN: f"{_type(v).__module__}.{_type(v).__qualname__}"}
        self.send("verdict", {"phase": phase, "verdict": d})

    def event(self, phase: str, detail: str, t: float) -> None:
        self.send("event", {"phase": phase, "detail": detail, "t": t})


@dataclass
class Reader:
    """The Verifier's end, drained by a thread of its own (a full pipe would stall the worker). Events
    (progress) queue for the watcher's own thread to pass on (`events`)."""

    fd: int
    key: bytes
    records: int = 0
    last_phase: str = "start"
    last: dict[str, Any] | None = None  # the latest verdict record's verdict
    problems: list[str] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)  # every hack finding any record had
    hacked: bool = False  # a record had status 'hacked'
    fixed: dict[str, Any] = field(default_factory=dict)  # FIXED_ONCE_SET fields as first reported
    _events: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None
    _finished: bool = False
    cut_short: bool = False  # the last record was not finished (its writer killed or dead)

    def start(self) -> Reader:
        self._thread = threading.Thread(target=self._drain, name="worker-report", daemon=True)
        self._thread.start()
        return self

    def _drain(self) -> None:
        buf = b""
        skipping = False
        try:
            while chunk := os.read(self.fd, 1 << 16):
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if skipping:
                        skipping = False  # (the rest of an oversized record)
                        continue
                    self._take(line)
                if len(buf) > MAX_RECORD:
                    self._problem(f"a record of more than {MAX_RECORD >> 20} MiB")
                    buf, skipping = b"", True
        except OSError:
            pass  # the read end closed under us: the worker is gone and waited for
        # A last record without its end of line: the worker was killed, or died, while writing it
        # (the watcher says which); the records before it stand.
        self.cut_short = bool(buf.strip())

    def _problem(self, what: str) -> None:
        with self._lock:
            if what not in self.problems:
                self.problems.append(what)

    def _take(self, line: bytes) -> None:
        mac, _, text = line.partition(b"\t")
        if not hmac.compare_digest(mac, sign(self.key, text).encode()):
            self._problem("a record not signed with the worker's key")
            return
        try:
            rec = json.loads(text)
            seq, kind = rec["seq"], rec["kind"]
        except (ValueError, KeyError, TypeError):
            self._problem("a record that is not the worker's JSON")
            return
        with self._lock:
            if self._finished:
                self.problems.append(f"a record after the worker's last one ({kind} #{seq})")
                return
            if seq != self.records + 1:
                self.problems.append(f"record #{seq} where #{self.records + 1} was due")
                self.records = max(self.records, seq if type(seq) is int else self.records)
                return
            self.records = seq
            if kind == "event":
                self._events.append({"t": rec.get("t"), "phase": str(rec.get("phase", "?")),
                                     "detail": str(rec.get("detail", ""))})
            elif kind == "verdict":
                self._verdict(rec)
            else:
                self.problems.append(f"a record of an unknown kind ({kind!r})")

    def _verdict(self, rec: dict[str, Any]) -> None:
        d = rec.get("verdict")
        if type(d) is not dict:
            self.problems.append("a verdict record without a verdict")
            return
        if has_foreign(d):
            self.problems.append("a verdict holding objects of the candidate's types (its class or lists replaced)")
        for f in d.get("hack_findings") or []:
            if isinstance(f, dict) and f not in self.findings:
                self.findings.append(f)
        self.hacked = self.hacked or d.get("status") == "hacked"
        for name in FIXED_ONCE_SET:
            if d.get(name) is None:
                if name in self.fixed:
                    self.problems.append(f"{name} taken back after it was reported")
            elif name not in self.fixed:
                self.fixed[name] = d[name]
            elif d[name] != self.fixed[name]:
                self.problems.append(f"{name} changed after it was reported")
        self.last, self.last_phase = d, str(rec.get("phase", "?"))
        self._finished = self.last_phase == FINAL

    def events(self) -> list[dict[str, Any]]:
        """The progress events read since the last call: {"t", "phase", "detail"}."""
        with self._lock:
            out, self._events = self._events, []
        return out

    def close(self, timeout_s: float = 5.0) -> None:
        """After the worker has exited: what is left in the pipe read, then the read end closed."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        if self._thread is not None:
            self._thread.join(1.0)

    def merged(self, name: str) -> tuple[Verdict | None, str]:
        """The worker's verdict (None where it sent none) and its last phase: its last verdict record,
        with every hack finding any record had, status 'hacked' where any record had it, and a
        report-forged finding for each record the worker did not write."""
        with self._lock:
            d, problems, findings, hacked = self.last, list(self.problems), list(self.findings), self.hacked
            d = dict(d) if d is not None else None
        if d is not None and any(f not in (d.get("hack_findings") or []) for f in findings):
            problems.append("a hack finding an earlier record had, taken back")
        if d is None:
            verdict = None
        else:
            d.pop(FOREIGN, None)
            try:
                verdict = Verdict.from_dict(d)
            except (TypeError, ValueError, KeyError) as e:
                problems.append(f"a verdict that does not read as one ({type(e).__name__})")
                verdict = None
        if verdict is None and not problems:
            return None, self.last_phase
        verdict = verdict or Verdict(candidate=name, status="error")
        for f in findings:
            try:
                found = Finding(**f)
            except TypeError:
                continue
            if all((g.code, g.message) != (found.code, found.message) for g in verdict.hack_findings):
                verdict.hack_findings.append(found)
        if problems:
            verdict.hack_findings.append(Finding(
                FORGED, "the worker's report held what the worker did not write: " + "; ".join(problems[:5]),
                data={"problems": problems[:20]}))
        if problems:  # (what the records said of its outputs cannot be trusted either)
            verdict.status, verdict.correct = "hacked", False
            verdict.message = "; ".join(f.message for f in verdict.hack_findings[:3])
        elif hacked and verdict.status != "hacked":
            verdict.status = "hacked"
            verdict.message = "; ".join(f.message for f in verdict.hack_findings[:3])
        return verdict, self.last_phase


def open_pipe() -> tuple[int, int]:
    """(read end, write end): the write end for the worker (Popen's pass_fds), the read end ours."""
    return os.pipe()

