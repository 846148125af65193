"""The examples that follow the documentation's patterns: config lines, the older API, views, save then load elsewhere."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def run(script: str, *args: str) -> str:
    """Run an example as `python examples/<script>` would, in its own process; its stdout."""
    env = dict(os.environ, IRFLOW_EPOCHS="1")
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def accuracy(out: str) -> float:
    return float(out.split("accuracy: ")[-1].split("%")[0])


def test_older_api_trains_and_another_process_evaluates_its_checkpoint(tmp_path):
    checkpoint = str(tmp_path / "older")
    trained = run("older_api_train.py", checkpoint)
    assert accuracy(trained) > 80
    evaluated = run("older_api_eval.py", checkpoint)
    assert accuracy(evaluated) == accuracy(trained)
    # futures with one call in flight: every batch but the last is counted right after the loop
    counted = int(evaluated.split("counted ")[1].split(" of 1000")[0])
    assert counted >= 900


def test_logical_views_example_trains():
    out = run("logical_views.py")
    assert "views: {'train': True, 'eval': True, 'eval scope': True}" in out
    assert accuracy(out) > 80


def test_ofrecord_example_writes_records_and_trains_from_them(tmp_path):
    out = run("ofrecord_train.py", str(tmp_path))
    assert "wrote 4000 training records in 4 part files" in out
    assert sorted(p.name for p in (tmp_path / "train").iterdir()) == ["part-0", "part-1", "part-2", "part-3"]
    assert accuracy(out) > 80


def test_variable_length_example_learns_from_each_devices_own_count_and_length():
    out = run("variable_length.py")
    assert "rows [28, 17]" in out  # the first step's counts, each device its own
    assert "the last batch's surest sequences, of both devices' rows: [" in out
    assert accuracy(out) > 75
