"""The StitchCUDA language server (pygls 2): each LSP feature is a small function over the plain
modules beside it (modules, jobs, proposal, diagnostics); no optimisation logic lives here.

Commands (workspace/executeCommand):
  stitchcuda.optimize [uri, className]  start a job; answers {"jobId", "token"} at once
  stitchcuda.cancel [jobId]             stop a running job (so does cancelling its progress)
  stitchcuda.jobs []                    every job's state and message
  stitchcuda.showProposal [jobId]       the diff and files a finished job proposes
  stitchcuda.accept [jobId]             apply the proposal (workspace/applyEdit); nothing before this
  stitchcuda.reject [jobId]             drop the proposal
  stitchcuda.results [jobId]            verdicts, rubric and kernel roofline as static HTML
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import from_fs_path, to_fs_path

from stitchcuda import __version__
from stitchcuda.events import ProgressEvent, RoundVerdict
from stitchcuda.types import Verdict

from . import config, diagnostics, modules, proposal
from .diagnostics import Annotated
from .jobs import Job

log = logging.getLogger(__name__)
OPTIMIZE, CANCEL, JOBS = "stitchcuda.optimize", "stitchcuda.cancel", "stitchcuda.jobs"
SHOW, ACCEPT, REJECT = "stitchcuda.showProposal", "stitchcuda.accept", "stitchcuda.reject"
RESULTS = "stitchcuda.results"
ACTION_KIND = lsp.CodeActionKind.RefactorRewrite
# Sent on a job's start, progress and end, for clients that show jobs (the VS Code status bar).
JOB_UPDATE = "stitchcuda/jobUpdate"


class _Protocol(LanguageServerProtocol):
    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):
        # Our ranges (tree-sitter, NCU findings) are in UTF-16 code units, LSP's default; a client
        # that prefers UTF-8 (recent Neovim lists it first) would otherwise get it from pygls.
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            general.position_encodings = [e for e in general.position_encodings if e == lsp.PositionEncodingKind.Utf16]
        return (yield from super().lsp_initialize(params))


class StitchServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("stitchcuda", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
                         protocol_cls=_Protocol)
        self.jobs: dict[str, Job] = {}
        self.tokens: dict[str, str] = {}  # progress token -> job id
        self.tasks: set[asyncio.Task[Any]] = set()
        # uri -> source (job id, or job id + ":accepted") -> what to show there
        self.notes: dict[str, dict[str, list[Annotated]]] = {}
        self._scans: dict[str, tuple[int | None, modules.PythonFile]] = {}
        # Settings from clients that cannot answer workspace/configuration (plain Neovim
        # start_client): initializationOptions, then workspace/didChangeConfiguration.
        self.pushed_settings: dict[str, Any] | None = None
        # A client with its own job UI (the VS Code extension) gets no end-of-job message popup.
        self.client_job_ui = False

    def scan(self, uri: str) -> modules.PythonFile:
        doc = self.workspace.get_text_document(uri)
        cached = self._scans.get(uri)
        if cached is not None and cached[0] is not None and cached[0] == doc.version:
            return cached[1]
        found = modules.scan(doc.source)
        self._scans[uri] = (doc.version, found)
        return found

    def publish(self, uri: str, source: str, items: list[Annotated] | None) -> None:
        per = self.notes.setdefault(uri, {})
        if items:
            per[source] = items
        else:
            per.pop(source, None)
        diags = [a.diagnostic for group in per.values() for a in group]
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=diags))

    def job(self, args: Any) -> Job:
        jid = _arg(args, 0, "jobId")
        if jid not in self.jobs:
            raise JsonRpcInvalidParams(f"no job {jid!r}")
        return self.jobs[jid]

    def say(self, kind: lsp.MessageType, text: str) -> None:
        self.window_show_message(lsp.ShowMessageParams(type=kind, message=text))


server = StitchServer()


def _arg(args: Any, i: int, name: str) -> Any:
    if isinstance(args, list | tuple) and len(args) > i:
        return args[i]
    if isinstance(args, list | tuple) and args and isinstance(args[0], dict) and name in args[0]:
        return args[0][name]
    raise JsonRpcInvalidParams(f"missing argument {i} ({name})")


# ---------------------------------------------------------------------------------------------
# Code actions


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[ACTION_KIND]))
def code_actions(ls: StitchServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    if not uri.endswith(".py"):
        return []
    found = ls.scan(uri)
    mod = found.module_at(params.range.start.line)
    if mod is None:
        return []
    actions = [lsp.CodeAction(
        title=f"Optimise {mod.name} end-to-end with StitchCUDA",
        kind=ACTION_KIND,
        command=lsp.Command(title=f"Optimise {mod.name}", command=OPTIMIZE, arguments=[uri, mod.name]),
    )]
    missing = found.missing_task_functions
    if missing:
        actions.append(lsp.CodeAction(
            title=f"Add {' and '.join(missing)} for {mod.name} (StitchCUDA needs example inputs)",
            kind=ACTION_KIND,
            edit=_scaffold_edit(ls, uri, found, mod),
        ))
    return actions


def _scaffold_edit(ls: StitchServer, uri: str, found: modules.PythonFile, mod: modules.ModuleClass) -> lsp.WorkspaceEdit:
    doc = ls.workspace.get_text_document(uri)
    lines = doc.lines
    end = lsp.Position(len(lines), 0) if doc.source.endswith("\n") else lsp.Position(
        max(0, len(lines) - 1), len(lines[-1].encode("utf-16-le")) // 2 if lines else 0)
    edits = [lsp.TextEdit(range=lsp.Range(end, end), new_text=modules.scaffold(mod))]
    if not any(ln.startswith(("import torch", "from torch ")) and "torch.nn" not in ln.split()[1:2] for ln in lines):
        edits.insert(0, lsp.TextEdit(range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), new_text="import torch\n"))
    return lsp.WorkspaceEdit(changes={uri: edits})


# ---------------------------------------------------------------------------------------------
# Jobs


@server.feature(lsp.INITIALIZE)
def initialize(ls: StitchServer, params: lsp.InitializeParams) -> None:
    opts = params.initialization_options
    ls.pushed_settings = config.section(opts)
    ls.client_job_ui = bool(isinstance(opts, dict) and opts.get("jobUi"))


@server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
def configuration_changed(ls: StitchServer, params: lsp.DidChangeConfigurationParams) -> None:
    got = config.section(params.settings)
    if got is not None:
        ls.pushed_settings = got


@server.command(OPTIMIZE)
async def optimize(ls: StitchServer, *args: Any) -> dict[str, Any]:
    uri, class_name = _arg(args, 0, "uri"), _arg(args, 1, "className")
    path = Path(to_fs_path(uri) or "")
    if not path.is_file():
        raise JsonRpcInvalidParams(f"{uri}: not a saved file on disk (StitchCUDA runs the file as saved)")
    found = modules.scan(path.read_text(errors="replace"))
    if found.module(class_name) is None:
        raise JsonRpcInvalidParams(f"{class_name} is not an nn.Module subclass in {path.name}")
    if found.missing_task_functions:
        raise JsonRpcInvalidParams(f"{path.name} has no {' or '.join(found.missing_task_functions)}: "
                                   "use the code action that adds them, then fill in real inputs")
    doc = ls.workspace.text_documents.get(uri)
    if doc is not None and doc.source != path.read_text(errors="replace"):
        ls.say(lsp.MessageType.Warning, f"{path.name} has unsaved changes: optimising the saved file")
    settings = await config.read(ls, uri, ls.pushed_settings)
    job = Job.new(path, class_name, settings)
    # An earlier job on the same module: its diagnostics give way to this one's.
    for old in ls.jobs.values():
        if (old.path, old.class_name) == (path, class_name) and old.state != "running":
            _clear(ls, old)
    ls.jobs[job.id] = job
    token = f"stitchcuda-{job.id}"
    ls.tokens[token] = job.id
    progress = bool(ls.client_capabilities.window and ls.client_capabilities.window.work_done_progress)
    if progress:
        await ls.work_done_progress.create_async(token)
        ls.work_done_progress.begin(token, lsp.WorkDoneProgressBegin(
            title=f"StitchCUDA: {class_name}", message="starting", cancellable=True, percentage=0))
    ls.protocol.notify(JOB_UPDATE, _job_state(job, detail="starting"))
    task = asyncio.create_task(_run(ls, job, token if progress else None))
    ls.tasks.add(task)
    task.add_done_callback(ls.tasks.discard)
    return {"jobId": job.id, "token": token, "runDir": str(job.run_dir)}


async def _run(ls: StitchServer, job: Job, token: str | None) -> None:
    best: RoundVerdict | None = None  # the run's best candidate so far, as the loop judges it
    last: ProgressEvent | None = None

    def on_event(e: ProgressEvent | RoundVerdict) -> None:
        nonlocal best, last
        if isinstance(e, RoundVerdict):
            best = e if e.best else best
            text = f"{e.label} {e.line}"
        else:
            last = e
            text = f"{e.label} {e.detail}".strip()
        ls.protocol.notify(JOB_UPDATE, _job_state(job, best, last, text))
        if token is None:
            return
        pct = int(100 * (e.round - 1) / max(1, job.settings.rounds)) if e.round else None
        msg = text + (f" | best so far: {best.line}" if best else "")
        ls.work_done_progress.report(token, lsp.WorkDoneProgressReport(message=msg[:200], percentage=pct))

    try:
        await job.run(on_event)
    except Exception as e:  # noqa: BLE001 - a job that cannot even start is a failed job
        job.state, job.message = "failed", f"could not run the optimisation: {type(e).__name__}: {e}"
    if job.result is not None and job.result.best is not None:
        best = job.result.best
    if token is not None:
        ls.work_done_progress.end(token, lsp.WorkDoneProgressEnd(message=f"{job.state}: {job.message}"[:200]))
    _publish_job(ls, job)
    ls.protocol.notify(JOB_UPDATE, _job_state(job, best, last))
    if ls.client_job_ui:
        return
    kind = lsp.MessageType.Info if job.proposal else lsp.MessageType.Warning
    if job.state == "failed":
        kind = lsp.MessageType.Error
    tail = " (stitchcuda.showProposal to see the diff, stitchcuda.accept to apply)" if job.proposal else ""
    ls.say(kind, f"StitchCUDA {job.class_name}: {job.message}{tail}")


def _job_state(job: Job, best: RoundVerdict | None = None, progress: ProgressEvent | None = None,
               detail: str = "") -> dict[str, Any]:
    """The params of stitchcuda/jobUpdate (extension/src/events.ts's JobUpdate): `best` and
    `progress` are the events' own dictionaries (numbers and codes); `message` is for people."""
    return {"jobId": job.id, "file": str(job.path), "uri": from_fs_path(str(job.path)),
            "className": job.class_name, "state": job.state, "message": job.message or detail,
            "best": best.to_dict() if best else None, "progress": progress.to_dict() if progress else None,
            "rounds": job.settings.rounds, "hasProposal": bool(job.proposal)}


def _publish_job(ls: StitchServer, job: Job) -> None:
    summary = job.summary or {}
    plan = summary.get("plan") or {}
    user_uri = from_fs_path(str(job.path))
    ls.publish(user_uri, job.id, diagnostics.profile_lines(plan.get("profile"), str(job.path.resolve())))
    for att in summary.get("attempts", []):
        v = Verdict.from_dict(att["verdict"])
        cand_dir = job.run_dir / att["candidate"]
        for fname, items in diagnostics.verdict_problems(v, "model_new.py").items():
            ls.publish(from_fs_path(str(cand_dir / fname)), job.id, items)
    best = _best_verdict(job)
    if best is not None and job.proposal:
        for fname, items in diagnostics.kernel_findings(best.findings).items():
            ls.publish(from_fs_path(str(job.run_dir / "proposal" / fname)), job.id, items)


def _best_verdict(job: Job) -> Verdict | None:
    summary = job.summary or {}
    for att in summary.get("attempts", []):
        if att["candidate"] == summary.get("best"):
            return Verdict.from_dict(att["verdict"])
    return None


def _clear(ls: StitchServer, job: Job) -> None:
    for uri, per in list(ls.notes.items()):
        if job.id in per:
            ls.publish(uri, job.id, None)


@server.command(CANCEL)
def cancel(ls: StitchServer, *args: Any) -> dict[str, Any]:
    job = ls.job(args)
    job.cancel()
    return {"jobId": job.id, "state": job.state, "cancelling": job.state == "running"}


@server.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CANCEL)
def progress_cancelled(ls: StitchServer, params: lsp.WorkDoneProgressCancelParams) -> None:
    jid = ls.tokens.get(str(params.token))
    if jid in ls.jobs:
        ls.jobs[jid].cancel()


@server.command(JOBS)
def jobs(ls: StitchServer, *args: Any) -> list[dict[str, Any]]:
    return [{"jobId": j.id, "file": str(j.path), "className": j.class_name, "state": j.state,
             "message": j.message, "hasProposal": bool(j.proposal)} for j in ls.jobs.values()]


# ---------------------------------------------------------------------------------------------
# Proposal


def _folder(ls: StitchServer, job: Job) -> Path:
    root = Path(ls.workspace.root_path) if ls.workspace.root_path else None
    return proposal.target_folder(job.path, job.settings.output_folder, root)


def _proposed(ls: StitchServer, args: Any) -> Job:
    job = ls.job(args)
    if job.state == "running":
        raise JsonRpcInvalidParams(f"job {job.id} is still running")
    if not job.proposal:
        raise JsonRpcInvalidParams(f"job {job.id} has no proposal: {job.message}")
    return job


@server.command(SHOW)
def show_proposal(ls: StitchServer, *args: Any) -> dict[str, Any]:
    job = _proposed(ls, args)
    folder = _folder(ls, job)
    return {"jobId": job.id, "message": job.message, "folder": str(folder),
            "files": [from_fs_path(str(folder / n)) for n in sorted(job.proposal)],
            "libraries": [from_fs_path(str(folder / p.name)) for p in job.libraries],
            "contents": {from_fs_path(str(folder / n)): text for n, text in sorted(job.proposal.items())},
            "diff": proposal.diff(job.proposal, folder)}


@server.command(ACCEPT)
async def accept(ls: StitchServer, *args: Any) -> dict[str, Any]:
    job = _proposed(ls, args)
    if not proposal.supports_file_creation(ls.client_capabilities):
        raise JsonRpcInvalidParams("this editor cannot create files through a workspace edit "
                                   f"(workspaceEdit.resourceOperations 'create'); the files are in {job.run_dir / 'proposal'}")
    folder = _folder(ls, job)
    result = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(
        edit=proposal.workspace_edit(job.proposal, folder), label=f"StitchCUDA: {job.class_name}"))
    if not result.applied:
        return {"applied": False, "reason": result.failure_reason or "the editor did not apply the edit"}
    # The prebuilt kernel library cannot travel in a text edit: once the edit is applied (the user
    # accepted), it is copied beside the accepted sources, which load it without StitchCUDA or nvcc.
    for library in job.libraries:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(library, folder / library.name)
    # The findings move from the run folder's copy to the accepted files (listed once, not twice).
    _clear_proposal(ls, job)
    best = _best_verdict(job)
    if best is not None:
        for fname, items in diagnostics.kernel_findings(best.findings).items():
            ls.publish(from_fs_path(str(folder / fname)), job.id + ":accepted", items)
    return {"applied": True, "files": [from_fs_path(str(folder / n)) for n in sorted(job.proposal)],
            "libraries": [from_fs_path(str(folder / p.name)) for p in job.libraries]}


@server.command(REJECT)
def reject(ls: StitchServer, *args: Any) -> dict[str, Any]:
    job = _proposed(ls, args)
    job.proposal = {}
    job.libraries = []
    _clear_proposal(ls, job)
    return {"rejected": True, "jobId": job.id}


def _clear_proposal(ls: StitchServer, job: Job) -> None:
    for uri, per in list(ls.notes.items()):
        if job.id in per and "/proposal/" in uri:
            ls.publish(uri, job.id, None)


@server.command(RESULTS)
def job_results(ls: StitchServer, *args: Any) -> dict[str, Any]:
    """A finished job's verdicts, rubric and kernel roofline as a static HTML page."""
    from . import results

    job = ls.job(args)
    if job.state == "running":
        raise JsonRpcInvalidParams(f"job {job.id} is still running")
    return {"jobId": job.id, "html": results.html(job.summary, f"StitchCUDA: {job.class_name}", job.message)}


# ---------------------------------------------------------------------------------------------
# Hover


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
def hover(ls: StitchServer, params: lsp.HoverParams) -> lsp.Hover | None:
    items = [a for group in ls.notes.get(params.text_document.uri, {}).values() for a in group]
    text = diagnostics.hover_at(items, params.position)
    if text is None:
        return None
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text))


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    server.start_io()
