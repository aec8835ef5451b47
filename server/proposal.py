"""A finished job's files as an LSP WorkspaceEdit, and as the diff the user reads before accepting.

The files go into one folder (beside the module's file, `<stem>_stitchcuda/`, unless a folder is
configured), because the generated ModelNew loads its .cu files from beside itself. A file that
already exists there is overwritten only through the edit the user accepts, and the diff shows
what changes in it.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import from_fs_path


def target_folder(module_file: Path, configured: str | None, workspace_root: Path | None = None) -> Path:
    if configured:
        folder = Path(configured).expanduser()
        if not folder.is_absolute():
            folder = (workspace_root or module_file.parent) / folder
        return folder
    return module_file.parent / f"{module_file.stem}_stitchcuda"


def workspace_edit(files: dict[str, str], folder: Path) -> lsp.WorkspaceEdit:
    changes: list[lsp.CreateFile | lsp.TextDocumentEdit] = []
    for name, text in sorted(files.items()):
        uri = from_fs_path(str(folder / name))
        changes.append(lsp.CreateFile(uri=uri, options=lsp.CreateFileOptions(overwrite=True)))
        changes.append(lsp.TextDocumentEdit(
            text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
            edits=[lsp.TextEdit(range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)), new_text=text)],
        ))
    return lsp.WorkspaceEdit(document_changes=changes)


def diff(files: dict[str, str], folder: Path) -> str:
    """Unified diff of the proposal against what is on disk now (new files against /dev/null)."""
    out: list[str] = []
    for name, text in sorted(files.items()):
        path = folder / name
        before = path.read_text(errors="replace").splitlines(keepends=True) if path.is_file() else []
        old = str(path) if path.is_file() else "/dev/null"
        out.extend(difflib.unified_diff(before, text.splitlines(keepends=True), fromfile=old, tofile=str(path)))
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def supports_file_creation(caps: lsp.ClientCapabilities | None) -> bool:
    ws = caps.workspace if caps else None
    edit = ws.workspace_edit if ws else None
    ops = (edit.resource_operations or []) if edit else []
    return bool(edit and edit.document_changes and lsp.ResourceOperationKind.Create in ops)
