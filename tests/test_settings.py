"""The one settings schema (stitchcuda/settings.py) against every place that describes the settings:
package.json's contributes.configuration, the extension's generated settings.schema.json, the
server's Settings, and the `stitchcuda optimize` flags; and its validation of what clients send."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from dataclasses import fields

import pytest

from stitchcuda.cli import build_parser
from stitchcuda.settings import (
    KEYS,
    PACKAGE_FILE,
    SCHEMA,
    SCHEMA_FILE,
    SERVER_KEYS,
    Problem,
    ProblemKind,
    Settings,
    dump,
    package_configuration,
    schema_json,
)

REGENERATE = "run `python -m stitchcuda.settings --write`"


def contributed() -> dict[str, dict]:
    return json.loads(PACKAGE_FILE.read_text())["contributes"]["configuration"]["properties"]


def test_package_json_has_exactly_the_schemas_keys() -> None:
    in_package = set(contributed())
    in_schema = {f"stitchcuda.{k.name}" for k in SCHEMA}
    assert not in_package - in_schema, f"in package.json, not in stitchcuda/settings.py: {in_package - in_schema}"
    assert not in_schema - in_package, f"in stitchcuda/settings.py, not in package.json ({REGENERATE}): " \
                                       f"{in_schema - in_package}"


def test_package_json_says_what_the_schema_says() -> None:
    props = contributed()
    for key in SCHEMA:
        p = props[f"stitchcuda.{key.name}"]
        assert p["type"] == ([key.type, "null"] if key.nullable else key.type), key.name
        assert p["default"] == key.default, key.name
        assert p.get("enum") == (list(key.enum) if key.enum else None), key.name
        assert p.get("enumDescriptions") == (list(key.enum_descriptions) if key.enum_descriptions else None), key.name
        assert p.get("markdownDescription" if key.markdown else "description") == key.description, key.name
        assert p.get("minimum") == key.minimum and p.get("maximum") == key.maximum, key.name
        assert p.get("pattern") == key.pattern and p["scope"] == key.scope, key.name
    # and nothing else, in the schema's order: the whole block is the generated one
    assert json.loads(PACKAGE_FILE.read_text())["contributes"]["configuration"] == package_configuration(), REGENERATE


def test_the_extensions_schema_file_is_fresh() -> None:
    assert SCHEMA_FILE.read_text() == dump(schema_json()), f"{SCHEMA_FILE.name} is stale: {REGENERATE}"


def test_the_command_prints_the_schema_and_the_package_block() -> None:
    def run(flag: str) -> object:
        out = subprocess.run([sys.executable, "-m", "stitchcuda.settings", flag], capture_output=True, text=True,
                             check=True).stdout
        return json.loads(out)

    assert run("--json") == schema_json()
    assert run("--package-json") == package_configuration()
    assert [k["name"] for k in schema_json()["keys"]] == [k.name for k in SCHEMA]


def test_every_server_key_is_a_settings_attribute_with_the_schemas_default() -> None:
    attrs = {f.name for f in fields(Settings)}
    assert {k.attr for k in SERVER_KEYS} == attrs, "a Settings field without a key, or a key without a field"
    default = Settings()
    for key in SERVER_KEYS:
        want = None if key.optional_text and key.default == "" else key.default
        assert getattr(default, key.attr) == want, key.name
    # the extension's own keys reach no job
    assert {k.name for k in SCHEMA if k.attr is None} == {"interpreter", "trace.server"}


def optimize_help() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args(["optimize", "--help"])
    return out.getvalue()


def test_every_cli_flag_is_an_optimize_flag() -> None:
    text = optimize_help()
    for key in SERVER_KEYS:
        if key.cli is not None:
            assert re.search(rf"(?<![\w-]){re.escape(key.cli)}(?![\w-])", text), \
                f"stitchcuda.{key.name} maps to {key.cli}, which `stitchcuda optimize --help` does not list"
    # the ones without a flag are the server's own business
    assert {k.name for k in SERVER_KEYS if k.cli is None} == {"outputFolder", "runsFolder"}


def dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def test_cli_args_give_the_cli_the_same_values() -> None:
    """Every flag parses with the CLI's own parser into the value the setting has, and the CLI's
    defaults are the schema's (a boolean at its default, or a value that is unset, gives no flag)."""
    changed, problems = Settings.from_config({
        "coder": "llm", "rounds": 7, "timeBudget": 120, "gpu": 1, "llmEndpoint": "https://e.example/v1",
        "llmModel": "m", "replay": "/r/summary.json", "profile": False, "timeline": False, "mode": "eval"})
    assert problems == []
    for settings in (changed, Settings()):
        args = build_parser().parse_args(["optimize", "m.py", *settings.cli_args()])
        for key in SERVER_KEYS:
            if key.cli is None:
                continue
            value = getattr(settings, key.attr)
            got = getattr(args, dest(key.cli))
            if key.type == "boolean":
                assert got is (value != key.default), f"{key.cli} for {key.name}={value}"
            else:
                assert got == value and type(got) is type(value), f"{key.cli}: {got!r} for {key.name}={value!r}"
    assert {"--no-profile", "--no-timeline"} <= set(changed.cli_args())
    assert Settings().cli_args() == ["--coder", "builtin", "--precision", "tf32", "--mode", "as-built", "--rounds", "3"]
    assert changed.mode == "eval" and "--mode eval" in " ".join(changed.cli_args())


def test_enums_are_the_clis_choices() -> None:
    for key in SERVER_KEYS:
        if key.enum is None or key.cli is None:
            continue
        for value in key.enum:
            assert getattr(build_parser().parse_args(["optimize", "m.py", key.cli, value]), dest(key.cli)) == value
        with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
            build_parser().parse_args(["optimize", "m.py", key.cli, "not-" + key.enum[0]])


# ---------------------------------------------------------------------------------------------
# Validation


def test_good_values_are_used_false_and_zero_included() -> None:
    s, problems = Settings.from_config({
        "coder": "llm", "rounds": 2, "timeBudget": 90.5, "gpu": 0, "llmEndpoint": " http://localhost:8000/v1 ",
        "llmModel": "qwen", "outputFolder": "/ws/out", "runsFolder": "/tmp/runs", "replay": "", "profile": False,
        "timeline": False,
        # the extension's own keys, as VS Code hands over the whole section (dotted names nested)
        "interpreter": "/x/python", "trace": {"server": "off"}})
    assert problems == []
    assert s == Settings(coder="llm", rounds=2, time_budget_s=90.5, gpu=0, llm_endpoint="http://localhost:8000/v1",
                         llm_model="qwen", output_folder="/ws/out", runs_folder="/tmp/runs", replay=None,
                         profile=False, timeline=False)


def test_unset_values_are_defaults_without_a_problem() -> None:
    assert Settings.from_config(None) == (Settings(), [])
    assert Settings.from_config({}) == (Settings(), [])
    # VS Code sends null for an unset nullable key; Lua clients send whole numbers as 3.0
    s, problems = Settings.from_config({"timeBudget": None, "gpu": None, "rounds": 3.0, "coder": None})
    assert problems == [] and s == Settings() and type(s.rounds) is int


@pytest.mark.parametrize(("key", "value", "kind", "why"), [
    ("rounds", "3", ProblemKind.TYPE, "must be a whole number"),
    ("rounds", 2.5, ProblemKind.TYPE, "must be a whole number"),
    ("rounds", True, ProblemKind.TYPE, "must be a whole number"),
    ("gpu", "1", ProblemKind.TYPE, "must be a whole number or null"),
    ("timeBudget", float("inf"), ProblemKind.TYPE, "must be a number or null"),
    ("profile", "yes", ProblemKind.TYPE, "must be true or false"),
    ("timeline", 0, ProblemKind.TYPE, "must be true or false"),
    ("replay", ["a"], ProblemKind.TYPE, "must be text"),
    ("rounds", 0, ProblemKind.RANGE, "must be at least 1"),
    ("gpu", -1, ProblemKind.RANGE, "must be at least 0"),
    ("timeBudget", 0.5, ProblemKind.RANGE, "must be at least 1"),
    ("coder", "gpt", ProblemKind.ENUM, "must be one of builtin, llm"),
    ("llmEndpoint", "api.example.com", ProblemKind.PATTERN, "must be an http(s) base URL"),
    ("round", 3, ProblemKind.UNKNOWN, "no such setting"),
])
def test_a_bad_value_keeps_the_default_and_is_a_problem(key: str, value: object, kind: ProblemKind, why: str) -> None:
    s, problems = Settings.from_config({key: value, "rounds" if key != "rounds" else "gpu": 2})
    assert len(problems) == 1, problems
    p = problems[0]
    assert (p.key, p.value, p.kind) == (key, value, kind)
    assert p.why.startswith(why), p.why
    assert p.message.startswith(f"stitchcuda.{key}: {why}")
    if key in KEYS:
        assert getattr(s, KEYS[key].attr) == getattr(Settings(), KEYS[key].attr)
        assert "using the default" in p.message
    else:
        assert "ignored; known: coder, llmEndpoint" in p.message
    # the good value beside it is still used
    assert (s.rounds if key != "rounds" else s.gpu) == 2


def test_every_problem_is_reported_and_messages_say_what_replaces_the_value() -> None:
    s, problems = Settings.from_config({"coder": "gpt", "rounds": 0, "timeBudget": -1, "gpu": 1.5, "profile": "yes",
                                        "timeline": 1, "bogus": True})
    assert s == Settings()
    assert [(p.key, p.kind) for p in problems] == [
        ("coder", ProblemKind.ENUM), ("rounds", ProblemKind.RANGE), ("timeBudget", ProblemKind.RANGE),
        ("gpu", ProblemKind.TYPE), ("profile", ProblemKind.TYPE), ("timeline", ProblemKind.TYPE),
        ("bogus", ProblemKind.UNKNOWN)]
    by_key = {p.key: p.message for p in problems}
    assert by_key["coder"] == 'stitchcuda.coder: must be one of builtin, llm, not "gpt"; using the default ("builtin")'
    assert by_key["gpu"] == "stitchcuda.gpu: must be a whole number or null, not 1.5; using the default (none)"
    assert by_key["timeline"] == "stitchcuda.timeline: must be true or false, not 1; using the default (true)"


def test_a_section_that_is_not_an_object_is_one_problem() -> None:
    s, problems = Settings.from_config(["rounds", 2])
    assert s == Settings()
    assert problems == [Problem("", ["rounds", 2], "the section must be an object of settings", ProblemKind.TYPE)]
    assert problems[0].message.startswith('stitchcuda: the section must be an object of settings, not ["rounds", 2]')
