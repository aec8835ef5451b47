"""server/config.py over real LSP: pytest-lsp's client talks over stdio to a real pygls LanguageServer
in a subprocess (this file, run as a script), whose one command reads the settings the way the
StitchCUDA server does before a job, with server.config.read. Bad values come back to the client
as window/showMessage warnings, whether the client is asked (workspace/configuration) or pushed its
settings in initializationOptions (plain Neovim)."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer  # pygls reads the handlers' annotations: a module-level name
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

PROBE = "probe.settings"
SERVER = [sys.executable, str(Path(__file__).resolve())]


def serve() -> None:
    from stitchcuda.server import config

    ls = LanguageServer("settings-probe", "0")
    pushed: dict[str, Any] = {}

    @ls.feature(lsp.INITIALIZE)
    def initialize(ls: LanguageServer, params: lsp.InitializeParams) -> None:
        pushed["cfg"] = config.section(params.initialization_options)

    @ls.command(PROBE)
    async def probe(ls: LanguageServer, *args: Any) -> dict[str, Any]:
        return asdict(await config.read(ls, args[0] if args else None, pushed.get("cfg")))

    ls.start_io()


async def settings(client: LanguageClient, uri: str = "file:///ws/m.py") -> dict[str, Any]:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command=PROBE, arguments=[uri]))


def warnings(client: LanguageClient) -> list[str]:
    assert all(m.type == lsp.MessageType.Warning for m in client.messages)
    return [m.message for m in client.messages]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def asked(lsp_client: LanguageClient):
    """A client that answers workspace/configuration (VS Code's capabilities)."""
    await lsp_client.initialize_session(lsp.InitializeParams(capabilities=client_capabilities("visual-studio-code")))
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def pushing(lsp_client: LanguageClient):
    """A client that cannot be asked: its settings come flat in initializationOptions, beside the
    extension's own options (client, jobUi), which are not settings."""
    await lsp_client.initialize_session(lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(),
        initialization_options={"client": "plain", "jobUi": False, "rounds": -2, "timeline": False, "gpu": 1}))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_asked_settings_are_used_and_bad_ones_shown(asked: LanguageClient) -> None:
    asked.set_configuration({"stitchcuda": {
        "rounds": 0, "coder": "gpt", "timeline": False, "profile": "no", "gpu": 0, "runsFolder": "/r", "round": 2,
        "interpreter": "/x/python", "trace": {"server": "off"}}})
    got = await settings(asked)
    assert got["timeline"] is False and got["gpu"] == 0 and got["runs_folder"] == "/r"
    assert (got["rounds"], got["coder"], got["profile"]) == (3, "builtin", True)
    assert warnings(asked) == [
        'stitchcuda.rounds: must be at least 1, not 0; using the default (3)',
        'stitchcuda.coder: must be one of builtin, llm, not "gpt"; using the default ("builtin")',
        'stitchcuda.profile: must be true or false, not "no"; using the default (true)',
        "stitchcuda.round: no such setting (ignored; known: coder, llmEndpoint, llmModel, precision, mode, rounds, arches, timeBudget, gpu, gpus, perRound, "
        "outputFolder, runsFolder, profile, timeline, replay)",
    ]


@pytest.mark.asyncio
async def test_good_settings_show_nothing(asked: LanguageClient) -> None:
    asked.set_configuration({"stitchcuda": {"rounds": 2, "timeBudget": 60, "llmEndpoint": "", "replay": "/run.json"}})
    got = await settings(asked)
    assert (got["rounds"], got["time_budget_s"], got["llm_endpoint"], got["replay"]) == (2, 60.0, None, "/run.json")
    assert asked.messages == []


@pytest.mark.asyncio
async def test_no_section_is_the_defaults(asked: LanguageClient) -> None:
    asked.set_configuration({})  # the client knows no `stitchcuda` section: it answers null
    got = await settings(asked)
    assert got["rounds"] == 3 and got["timeline"] is True
    assert asked.messages == []


@pytest.mark.asyncio
async def test_pushed_settings_are_checked_too(pushing: LanguageClient) -> None:
    got = await settings(pushing)
    assert (got["rounds"], got["timeline"], got["gpu"]) == (3, False, 1)
    assert warnings(pushing) == ["stitchcuda.rounds: must be at least 1, not -2; using the default (3)"]


if __name__ == "__main__":
    serve()
