"""The client's `stitchcuda` settings, read and checked against the one schema (stitchcuda.settings).

Every bad value keeps its default and is told to the user with window/showMessage, so a Neovim user
sees it as a VS Code user does, at the moment a job would have used it.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer

from stitchcuda.settings import SECTION, Problem, Settings

log = logging.getLogger(__name__)

# What the VS Code extension puts in initializationOptions beside (never inside) the settings; a flat
# options object is otherwise read as the section itself, and these would be "no such setting".
INIT_OPTIONS = frozenset({"client", "jobUi"})


def section(value: Any) -> dict[str, Any] | None:
    """The `stitchcuda` section of initializationOptions or didChangeConfiguration's settings, which
    clients send either wrapped ({"stitchcuda": {...}}) or as the section itself."""
    if not isinstance(value, dict):
        return None
    inner = value.get(SECTION)
    if isinstance(inner, dict):
        return inner
    return {k: v for k, v in value.items() if k not in INIT_OPTIONS}


def report(ls: LanguageServer, problems: list[Problem]) -> None:
    for p in problems:
        log.warning("%s", p.message)
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=p.message))


def resolve(ls: LanguageServer, cfg: Any) -> Settings:
    """Settings from the client's section, each problem shown to the user."""
    settings, problems = Settings.from_config(cfg)
    report(ls, problems)
    return settings


async def read(ls: LanguageServer, uri: str | None, pushed: dict[str, Any] | None) -> Settings:
    """The settings a job for `uri` runs with: asked of the client (workspace/configuration, for the
    file's scope), or those it pushed (initializationOptions, didChangeConfiguration) when it cannot
    be asked."""
    caps = ls.client_capabilities.workspace
    if not (caps and caps.configuration):
        return resolve(ls, pushed)
    try:
        got = await ls.workspace_configuration_async(
            lsp.ConfigurationParams(items=[lsp.ConfigurationItem(scope_uri=uri, section=SECTION)]))
    except Exception as e:  # noqa: BLE001 - a client that fails the request gets the defaults
        log.warning("workspace/configuration failed: %s", e)
        return Settings()
    return resolve(ls, got[0] if got else None)
