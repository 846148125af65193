"""The README's example program runs as written and prints the two IR stages it promises."""

import contextlib
import io
import pathlib
import re

import irflow as flow

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_readme_example_runs():
    text = (ROOT / "README.md").read_text()
    program = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    flow.clear_default_session()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program, "README.md", "exec"), {})
    flow.clear_default_session()
    printed = out.getvalue()
    assert "job.func @mlp" in printed and "job.matmul" in printed
    assert "buffer.program @mlp" in printed and "buffer.arena" in printed
