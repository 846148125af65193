"""The documentation runs as written: the README's Python program, and every `irflow-opt` command line in
README.md and docs/*.md, with the output excerpt (a ```text block right after the command) it shows.

A command's input under `irflow_out/ir/` is the dump of the job the documentation makes it from (the
example of `make run`, or a docs/ snippet), written here by `IRFLOW_DUMP_IR` as it would be there.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import runpy
import shlex
from collections.abc import Callable

import numpy as np
import pytest

import irflow as flow
from irflow.tools.opt import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DUMPS = "irflow_out/ir/"
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def fenced(page: pathlib.Path) -> list[tuple[str, str]]:
    """The page's fenced blocks, in order, as (language, body)."""
    return FENCE.findall(page.read_text())


def commands() -> list[tuple[str, list[str], str | None]]:
    """Every documented irflow-opt command line: (where, argv after irflow-opt, the output excerpt or None).

    A ```text block right after a ```sh block is the output of the block's last command."""
    found = []
    for page in PAGES:
        blocks = fenced(page)
        for i, (lang, body) in enumerate(blocks):
            if lang != "sh":
                continue
            excerpt = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "text" else None
            runs = []
            for line in body.replace("\\\n", " ").splitlines():
                words = shlex.split(line, comments=True)
                tool = next((k for k, w in enumerate(words) if w.endswith("irflow-opt")), None)
                if tool is not None:
                    runs.append((f"{page.name}: {line.strip()[:60]}", words[tool + 1 :], None))
            if runs:
                runs[-1] = (*runs[-1][:2], excerpt)
            found += runs
    return found


def assert_shows(excerpt: str, output: str) -> None:
    """Each line of `excerpt` but the `...` elisions is a line of `output`, in the same order."""
    lines = iter(line.strip() for line in output.splitlines())
    for wanted in (line.strip() for line in excerpt.splitlines()):
        if wanted and wanted != "...":
            assert any(line == wanted for line in lines), f"the output does not show, in order: {wanted}"


def run_quietly(program: Callable[[], object]) -> str:
    """What `program` prints, kept out of the test's output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        program()
    return out.getvalue()


@pytest.fixture
def session():
    flow.clear_default_session()
    yield
    flow.clear_default_session()


def test_readme_example_runs(session, tmp_path):
    program = next(body for lang, body in fenced(ROOT / "README.md") if lang == "python")
    scope: dict = {}
    printed = run_quietly(lambda: exec(compile(program, "README.md", "exec"), scope))
    assert "job.func @mlp" in printed and "job.matmul" in printed
    assert "buffer.program @mlp" in printed and "buffer.arena" in printed
    assert scope["logits"].shape == (100, 10)
    plan = scope["mlp"].memory_plan()  # the README's `job.memory_plan().table()` and `.plot("plan.svg")`
    assert "input 0 %images" in plan.table()
    plan.plot(tmp_path / "plan.svg")
    assert (tmp_path / "plan.svg").stat().st_size > 0


def dump_make_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make run`'s jobs (examples/main.py), compiled without training."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    scope = runpy.run_path(str(ROOT / "examples" / "main.py"), run_name="docs")  # not "__main__": no training
    assert "train_job" in scope
    flow.sync_default_session()


def dump_distributed(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/distributed.md's job on 4 devices, called once as the page calls it."""
    program = [body for lang, body in fenced(ROOT / "docs" / "distributed.md") if lang == "python"][1]
    rng = np.random.default_rng(0)
    scope = {"images": rng.random((32, 784), dtype=np.float32), "labels": rng.integers(0, 10, 32, dtype=np.int32)}
    printed = run_quietly(lambda: exec(compile(program, "distributed.md", "exec"), scope))
    assert scope["loss"].shape == (32,) and "job.boxing" in printed


# The documented dump each command reads, and what writes it.
MAKERS = {"train_job.00.job.mlir": dump_make_run, "train.00.job.mlir": dump_distributed}


@pytest.mark.parametrize("argv, excerpt, where", [pytest.param(a, e, w, id=w) for w, a, e in commands()])
def test_documented_command(argv, excerpt, where, session, tmp_path, monkeypatch, capsys):
    dumps = tmp_path / "ir"
    monkeypatch.setenv("IRFLOW_DUMP_IR", str(dumps))
    args = []
    for arg in argv:
        if arg.startswith(DUMPS):
            name = arg[len(DUMPS) :]
            assert name in MAKERS, f"{where}: nothing the docs describe writes {arg}"
            MAKERS[name](monkeypatch)
            arg = str(dumps / name)
        elif (ROOT / arg).exists():
            arg = str(ROOT / arg)
        args.append(arg)
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, f"{where}: exit {code}\n{err}"
    if excerpt is not None:
        assert_shows(excerpt, out)


def test_every_command_is_found():
    """The extraction sees the commands the pages are known to have, so the test above cannot go empty."""
    pages = {where.split(":")[0] for where, _, _ in commands()}
    assert {"README.md", "distributed.md", "sbp.md"} <= pages
