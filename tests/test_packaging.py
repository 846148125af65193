"""pyproject lists packages by hand (three live outside irflow/); keep the list complete."""

import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAPPED = {"dialects": "irflow.dialects", "passes": "irflow.passes", "tools": "irflow.tools"}


def test_every_package_is_listed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for init in ROOT.glob("**/__init__.py"):
        rel = init.parent.relative_to(ROOT)
        if rel.parts[0] in MAPPED:
            found.add(".".join((MAPPED[rel.parts[0]], *rel.parts[1:])))
        elif rel.parts[0] == "irflow":
            found.add(".".join(rel.parts))
    assert found == listed
