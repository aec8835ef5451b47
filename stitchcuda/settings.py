"""The `stitchcuda.*` settings: one schema, and the validated values the server runs jobs with.

Everything else is generated from or checked against SCHEMA: package.json's
contributes.configuration and extension/src/settings.schema.json (`python -m stitchcuda.settings
--write`), the extension's list of keys (it reads that JSON), and the `stitchcuda optimize` flags
each key maps to (tests/test_settings.py parses them with the CLI's own parser).

    python -m stitchcuda.settings --json           # the schema
    python -m stitchcuda.settings --package-json   # package.json's contributes.configuration
    python -m stitchcuda.settings --write          # both generated files, in this checkout
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Literal

SECTION = "stitchcuda"
TITLE = "StitchCUDA"

Kind = Literal["string", "integer", "number", "boolean"]


@dataclass(frozen=True)
class Key:
    """One setting, `stitchcuda.<name>`."""

    name: str
    type: Kind
    default: Any
    description: str
    # The Settings attribute it becomes. None: the extension's own setting, never sent to the server.
    attr: str | None = None
    # The `stitchcuda optimize` flag it maps to. A boolean's flag is the non-default value
    # (--no-profile); None: the server uses it itself (where accepted files go, where runs live).
    cli: str | None = None
    nullable: bool = False  # null is a value (and the default): "none", "the default device"
    enum: tuple[str, ...] | None = None
    enum_descriptions: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    pattern: str | None = None  # ECMAScript and Python read it alike; VS Code checks it as you type
    pattern_error: str | None = None
    markdown: bool = False  # the description is Markdown (package.json's markdownDescription)
    path: bool = False  # the extension expands `${workspaceFolder}` and `~` in it
    scope: str = "resource"

    @property
    def optional_text(self) -> bool:
        """A free-text setting whose empty string means "not set" (None in Settings)."""
        return self.type == "string" and self.enum is None


# The order is package.json's, which is the order VS Code's settings page shows them in.
SCHEMA: tuple[Key, ...] = (
    Key("interpreter", "string", "",
        "Python interpreter that runs the StitchCUDA language server (it needs `pip install "
        "'stitchcuda[server]'`). Empty: the interpreter selected in the Python extension, else `python3` "
        "on PATH. `${workspaceFolder}` and `~` are expanded.", markdown=True),
    Key("coder", "string", "builtin", "Which coder writes the candidate kernels.", attr="coder", cli="--coder",
        enum=("builtin", "llm"),
        enum_descriptions=(
            "The built-in coder: fused pointwise kernels plus cuBLAS/cuDNN and one emitter per op family",
            "An LLM writes the CUDA (needs stitchcuda.llmEndpoint, stitchcuda.llmModel and an API key: "
            "'StitchCUDA: Set LLM API Key')")),
    Key("llmEndpoint", "string", "",
        "Base URL of an OpenAI-compatible API for the `llm` coder, e.g. `https://api.openai.com/v1`. The API "
        "key is not a setting: use **StitchCUDA: Set LLM API Key**.", attr="llm_endpoint", cli="--llm-endpoint",
        pattern=r"^$|^https?://\S+$", pattern_error="an http(s) base URL such as https://api.openai.com/v1",
        markdown=True),
    Key("llmModel", "string", "", "Model name for the llm coder.", attr="llm_model", cli="--llm-model"),
    Key("precision", "string", "tf32",
        "What fp32 matmuls and convolutions may run on. Every proposal and verdict says which was used, "
        "and torch.compile is also timed under the same policy.", attr="precision", cli="--precision",
        enum=("tf32", "strict"),
        enum_descriptions=(
            "TF32 tensor cores allowed (like torch.set_float32_matmul_precision('high') and cuDNN's TF32); "
            "outputs of matmul-like ops are held to 1e-2 relative",
            "No TF32 anywhere: full fp32, as PyTorch's own defaults for matmul; KernelBench's 1e-4 check is "
            "reported too")),
    Key("mode", "string", "as-built",
        "The module's mode while it is optimised. Where forward depends on it (BatchNorm, dropout), the "
        "optimised ModelNew computes that mode's math and refuses the other.", attr="mode", cli="--mode",
        enum=("as-built", "train", "eval"),
        enum_descriptions=(
            "As the module's constructor leaves it (training, unless its __init__ calls .eval())",
            "After .train(): batch statistics, dropout",
            "After .eval(), for inference: BatchNorm's running statistics, no dropout")),
    Key("rounds", "integer", 3, "Optimisation rounds per job.", attr="rounds", cli="--rounds", minimum=1),
    Key("arches", "string", "",
        "GPU arches the proposal's prebuilt kernel library is built for, e.g. `sm_80,sm_90` (a fat binary, "
        "with PTX for newer GPUs), so the accepted module runs without StitchCUDA or nvcc on those GPUs. "
        "Empty: this machine's GPU.", attr="arches", cli="--arch",
        pattern=r"^$|^(sm_)?[0-9]+[af]?(, *(sm_)?[0-9]+[af]?)*$", pattern_error="GPU arches such as sm_80,sm_90",
        markdown=True),
    Key("timeBudget", "number", None, "Time budget per job in seconds (null: no budget).",
        attr="time_budget_s", cli="--budget", nullable=True, minimum=1),
    Key("gpu", "integer", None, "CUDA device index to verify and time on (null: the default device).",
        attr="gpu", cli="--gpu", nullable=True, minimum=0),
    Key("gpus", "string", "",
        "GPUs to verify each round's candidates on at once, one worker and lock per GPU: `all` or indices "
        "such as `0,1` (takes the place of `stitchcuda.gpu`). Empty: one GPU.", attr="gpus", cli="--gpus",
        pattern=r"^$|^all$|^[0-9]+( *, *[0-9]+)*$", pattern_error="all, or GPU indices such as 0,1", markdown=True),
    Key("perRound", "integer", None,
        "Candidates a round (null: one per GPU of `stitchcuda.gpus`). The llm coder writes alternatives; "
        "the built-in coder writes one.", attr="per_round", cli="--per-round", nullable=True, minimum=1,
        markdown=True),
    Key("outputFolder", "string", "",
        "Folder for accepted files, relative to the workspace folder or absolute. Empty: "
        "`<module>_stitchcuda/` beside the module's file.", attr="output_folder", markdown=True, path=True),
    # The job's own folder under it is what goes to `optimize --out`, not the setting itself.
    Key("runsFolder", "string", "",
        "Folder for run artifacts (every candidate, build log and verdict). Empty: "
        "`~/.cache/stitchcuda/runs`.", attr="runs_folder", markdown=True, path=True),
    Key("profile", "boolean", True, "Profile accepted candidates with Nsight Compute (ncu).",
        attr="profile", cli="--no-profile"),
    Key("timeline", "boolean", True,
        "Also profile the reference with Nsight Systems (nsys), where it is installed: the GPU's busy share "
        "of each forward (up to 90 s per job).", attr="timeline", cli="--no-timeline"),
    Key("replay", "string", "",
        "Advanced: a recorded GPU run to replay on a machine without a GPU (tests and demos). Empty: off.",
        attr="replay", cli="--replay", markdown=True, path=True),
    Key("trace.server", "string", "off",
        "Traces the communication between VS Code and the StitchCUDA language server (output channel "
        "'StitchCUDA Trace').", enum=("off", "messages", "verbose"), scope="window"),
)

KEYS: dict[str, Key] = {k.name: k for k in SCHEMA}
SERVER_KEYS: tuple[Key, ...] = tuple(k for k in SCHEMA if k.attr is not None)
# VS Code nests dotted names when it hands over a section ({"trace": {"server": "off"}}).
_PREFIXES = frozenset(k.name.split(".")[0] for k in SCHEMA if "." in k.name)


def _default(name: str) -> Any:
    key = KEYS[name]
    return None if key.optional_text and key.default == "" else key.default


@dataclass
class Settings:
    """The server's settings as a job uses them: each value valid, or its default."""

    coder: str = _default("coder")
    rounds: int = _default("rounds")
    precision: str = _default("precision")
    mode: str = _default("mode")
    arches: str | None = _default("arches")  # the prebuilt library's GPU arches; None: this machine's GPU
    time_budget_s: float | None = _default("timeBudget")
    gpu: int | None = _default("gpu")
    gpus: str | None = _default("gpus")  # "all" or "0,1": a round's candidates verified at once
    per_round: int | None = _default("perRound")
    llm_endpoint: str | None = _default("llmEndpoint")
    llm_model: str | None = _default("llmModel")
    output_folder: str | None = _default("outputFolder")  # accepted files; None: beside the module's file
    runs_folder: str | None = _default("runsFolder")  # run artifacts; None: the user cache
    replay: str | None = _default("replay")  # a recorded GPU run, for machines without a GPU (tests, demos)
    profile: bool = _default("profile")  # Nsight Compute on accepted candidates
    timeline: bool = _default("timeline")  # Nsight Systems on the reference, where nsys is installed

    @classmethod
    def from_config(cls, cfg: Any) -> tuple[Settings, list[Problem]]:
        """The client's `stitchcuda` section: a bad value keeps its default and becomes a Problem."""
        if cfg is None:
            return cls(), []
        if not isinstance(cfg, Mapping):
            return cls(), [Problem("", cfg, "the section must be an object of settings", ProblemKind.TYPE)]
        values: dict[str, Any] = {}
        problems: list[Problem] = []
        for name, raw in cfg.items():
            key = KEYS.get(name)
            if key is None:
                if name not in _PREFIXES:
                    problems.append(Problem(name, raw, "no such setting", ProblemKind.UNKNOWN))
                continue
            if key.attr is None or raw is None:  # the extension's own; or unset (VS Code sends null)
                continue
            value, problem = _check(key, raw)
            if problem is not None:
                problems.append(problem)
            else:
                values[key.attr] = value
        return cls(**values), problems

    def cli_args(self) -> list[str]:
        """The `stitchcuda optimize` flags that give a run these settings: every value that is set, and
        a boolean's flag where it is off its default (the CLI's defaults are the schema's)."""
        argv: list[str] = []
        for key in SERVER_KEYS:
            if key.cli is None or (key.attr == "gpu" and self.gpus):  # gpus takes the place of gpu
                continue
            value = getattr(self, key.attr)  # type: ignore[arg-type]
            if key.type == "boolean":
                if value != key.default:
                    argv.append(key.cli)
            elif value is not None:
                argv += [key.cli, str(value)]
        return argv


class ProblemKind(str, Enum):
    TYPE = "type"
    RANGE = "range"
    ENUM = "enum"
    PATTERN = "pattern"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Problem:
    """A value that was not used: which key ("" for the section itself), what it was, and why."""

    key: str
    value: Any
    why: str
    kind: ProblemKind

    @property
    def setting(self) -> str:
        return f"{SECTION}.{self.key}" if self.key else SECTION

    @property
    def message(self) -> str:
        got = json.dumps(self.value, default=repr)
        if self.kind is ProblemKind.UNKNOWN:
            return f"{self.setting}: {self.why} (ignored; known: {', '.join(k.name for k in SERVER_KEYS)})"
        key = KEYS.get(self.key)
        using = "" if key is None else f"; using {_show(_default(key.name))}"
        return f"{self.setting}: {self.why}, not {got}{using}"


def _show(value: Any) -> str:
    return "the default (none)" if value is None else f"the default ({json.dumps(value)})"


_TYPE_WORDS = {"string": "text", "integer": "a whole number", "number": "a number", "boolean": "true or false"}


def _check(key: Key, raw: Any) -> tuple[Any, Problem | None]:
    def bad(why: str, kind: ProblemKind) -> tuple[Any, Problem]:
        return None, Problem(key.name, raw, why, kind)

    wants = _TYPE_WORDS[key.type] + (" or null" if key.nullable else "")
    if key.type == "boolean":
        return (raw, None) if isinstance(raw, bool) else bad(f"must be {wants}", ProblemKind.TYPE)
    if key.type == "string":
        if not isinstance(raw, str):
            return bad(f"must be {wants}", ProblemKind.TYPE)
        value = raw.strip()
        if key.enum is not None and value not in key.enum:
            return bad(f"must be one of {', '.join(key.enum)}", ProblemKind.ENUM)
        if key.pattern is not None and not re.search(key.pattern, value):
            return bad(f"must be {key.pattern_error or 'text matching ' + key.pattern}", ProblemKind.PATTERN)
        return (None if key.optional_text and value == "" else value), None
    # integer / number; bool is an int in Python and never a number in a settings file
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        return bad(f"must be {wants}", ProblemKind.TYPE)
    if key.type == "integer":
        # Lua and some JSON writers send whole numbers as floats (3.0)
        if isinstance(raw, float) and not raw.is_integer():
            return bad(f"must be {wants}", ProblemKind.TYPE)
        value: int | float = int(raw)
    else:
        value = float(raw)
    if key.minimum is not None and value < key.minimum:
        return bad(f"must be at least {_number(key.minimum)}", ProblemKind.RANGE)
    if key.maximum is not None and value > key.maximum:
        return bad(f"must be at most {_number(key.maximum)}", ProblemKind.RANGE)
    return value, None


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# ---------------------------------------------------------------------------------------------
# Generated files


def schema_json() -> dict[str, Any]:
    """The schema as extension/src/settings.schema.json holds it."""
    out = []
    for key in SCHEMA:
        d = asdict(key)
        for f in ("enum", "enum_descriptions"):
            d[f] = list(d[f]) if d[f] is not None else None
        out.append(d)
    return {"section": SECTION, "title": TITLE, "keys": out}


def package_configuration() -> dict[str, Any]:
    """package.json's contributes.configuration."""
    props: dict[str, Any] = {}
    for key in SCHEMA:
        p: dict[str, Any] = {"type": [key.type, "null"] if key.nullable else key.type}
        if key.enum is not None:
            p["enum"] = list(key.enum)
        p["default"] = key.default
        for name, value in (("minimum", key.minimum), ("maximum", key.maximum), ("pattern", key.pattern),
                            ("patternErrorMessage", key.pattern_error and f"Must be {key.pattern_error}.")):
            if value is not None:
                p[name] = int(value) if isinstance(value, float) and value.is_integer() else value
        p["scope"] = key.scope
        if key.enum_descriptions is not None:
            p["enumDescriptions"] = list(key.enum_descriptions)
        p["markdownDescription" if key.markdown else "description"] = key.description
        props[f"{SECTION}.{key.name}"] = p
    return {"title": TITLE, "properties": props}


def dump(obj: Any) -> str:
    """JSON as npm writes package.json (two spaces, a final newline), so a regenerated file diffs cleanly."""
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "extension" / "src" / "settings.schema.json"
PACKAGE_FILE = ROOT / "package.json"


def write(root: Path = ROOT) -> list[Path]:
    package = root / PACKAGE_FILE.name
    if not package.is_file():
        raise FileNotFoundError(f"{package}: --write updates a source checkout, and this is not one")
    pkg = json.loads(package.read_text())
    pkg["contributes"]["configuration"] = package_configuration()
    schema_file = root / SCHEMA_FILE.relative_to(ROOT)
    schema_file.write_text(dump(schema_json()))
    package.write_text(dump(pkg))
    return [schema_file, package]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m stitchcuda.settings", description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--json", action="store_true", help="print the schema as JSON")
    g.add_argument("--package-json", action="store_true", help="print package.json's contributes.configuration")
    g.add_argument("--write", action="store_true",
                   help="write extension/src/settings.schema.json and package.json's configuration")
    args = p.parse_args(argv)
    if args.write:
        for path in write():
            print(f"wrote {path}")
    else:
        sys.stdout.write(dump(schema_json() if args.json else package_configuration()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
