"""What the MCP tool list costs an agent's context, beside an earlier revision measured in the
same run.

    .venv/bin/python -m bench.tool_list [--baseline REV]

For this checkout and for ``REV`` (default ``c58d43b``, the last revision before the small tool
list; its tree is taken with ``git archive`` into a temporary directory and measured by a
subprocess of the same interpreter, so both use the same SDK): the ``tools/list`` result each
serves with default settings, as compact JSON (what coordination.md §3 counts, output schemas
included), and the part most harnesses give the model (names, descriptions, input schemas), in
characters and in tokens of two OpenAI encodings (``bpe-openai``, which carries its vocabularies:
``pip install bpe-openai``; without it the token columns say so). The default set, and every
tool (``INBOTS_MCP_TOOLS=all``). The figures do not depend on the machine's load: no timing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BASELINE = "c58d43b"
BUDGET = 12_000
ENCODINGS = ("o200k_base", "cl100k_base")


def listings() -> dict[str, Any]:
    """The tool lists of the ``inbots`` on ``sys.path``, as its ``/mcp`` serves them."""
    from inbots.config import load_settings
    from inbots.limits import Limits
    from inbots.mcp import server

    limits_json = Limits.of(load_settings()).model_dump_json()
    found = {}
    for name, everything in (("default", False), ("all", True)):
        try:
            listed = server._catalogue(limits_json, everything)[0]  # type: ignore[call-arg]
        except TypeError:  # before the default set: one list, every tool
            listed = server._catalogue(limits_json)[0]  # type: ignore[call-arg]
        found[name] = listed.model_dump(mode="json", by_alias=True, exclude_none=True)
    return found


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def seen_by_the_model(result: dict[str, Any]) -> str:
    keep = ("name", "description", "inputSchema")
    return compact([{k: tool[k] for k in keep if k in tool} for tool in result["tools"]])


def tokens(text: str) -> dict[str, int | None]:
    try:
        import bpe_openai
    except ImportError:
        return dict.fromkeys(ENCODINGS)
    return {name: len(bpe_openai.get_encoding(name).encode(text)) for name in ENCODINGS}


def figures(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for name, result in found.items():
        whole, model = compact(result), seen_by_the_model(result)
        out[name] = {
            "tools": len(result["tools"]),
            "chars": len(whole),
            "model_chars": len(model),
            "output_schemas": sum("outputSchema" in tool for tool in result["tools"]),
            "tokens": tokens(whole),
            "model_tokens": tokens(model),
        }
    return out


def baseline_listings(rev: str) -> dict[str, Any]:
    root = Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip())
    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(
            ["git", "archive", rev, "inbots"], cwd=root, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        code = "import json, bench.tool_list as t; print(json.dumps(t.listings()))"
        env = {"PYTHONPATH": f"{tree}:{root}", "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(f"measuring {rev} failed:\n{done.stderr}")
        return json.loads(done.stdout)  # type: ignore[no-any-return]


def show(label: str, now: dict[str, Any], before: dict[str, Any]) -> None:
    def ratio(a: int | None, b: int | None) -> str:
        return f"{a / b:.2f}×" if a and b else "–"

    print(f"\n{label}: {now['tools']} tools now, {before['tools']} at the baseline")
    print(f"{'figure':<34}{'now':>10}{'baseline':>10}{'ratio':>8}")
    rows = [
        ("tools/list, compact JSON (chars)", now["chars"], before["chars"]),
        ("  of it, output schemas (tools)", now["output_schemas"], before["output_schemas"]),
        ("seen by the model (chars)", now["model_chars"], before["model_chars"]),
    ]
    for encoding in ENCODINGS:
        rows.append((f"tools/list ({encoding} tokens)", *_pair(now, before, "tokens", encoding)))
        rows.append(
            (f"seen by the model ({encoding})", *_pair(now, before, "model_tokens", encoding))
        )
    for name, a, b in rows:
        print(f"{name:<34}{_n(a):>10}{_n(b):>10}{ratio(a, b):>8}")


def _pair(now: dict[str, Any], before: dict[str, Any], key: str, enc: str) -> tuple[Any, Any]:
    return now[key][enc], before[key][enc]


def _n(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE, help="git revision to compare with")
    args = parser.parse_args()
    now, before = figures(listings()), figures(baseline_listings(args.baseline))
    show("Default set", now["default"], before["default"])
    show("Every tool (INBOTS_MCP_TOOLS=all)", now["all"], before["all"])
    within = now["default"]["chars"] <= BUDGET
    print(f"\nDefault tools/list within {BUDGET:,} characters: {'yes' if within else 'NO'}")
    if now["default"]["tokens"]["o200k_base"] is None:
        print("(no tokens: pip install bpe-openai)")
    sys.exit(0 if within else 1)


if __name__ == "__main__":
    main()
