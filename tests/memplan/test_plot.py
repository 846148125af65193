"""The SVG picture of a plan (irflow/memplan/plot.py)."""

import xml.etree.ElementTree as ET

from irflow.memplan import Buffer, plan, plot_plan

SVG = "{http://www.w3.org/2000/svg}"


def test_svg_parses_with_one_rectangle_per_buffer(tmp_path):
    buffers = [
        Buffer(10, 0, 1),
        Buffer(20, 1, 2),
        Buffer(30, 2, 3),
        Buffer(40, 3, 4),
        Buffer(50, 0, 1),
        Buffer(0, 2, 2),
    ]
    result = plan(buffers, alignment=1)
    path = tmp_path / "plan.svg"
    plot_plan(buffers, result, path)
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    rects = [r for r in root.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None]
    assert len(rects) == 5  # the empty buffer draws nothing
    assert len(list(root.iter(f"{SVG}polyline"))) == 1  # the lower-bound profile
    assert "80 B / lower bound 80 B = 1.0000" in "".join(root.find(f"{SVG}text").itertext())


def test_empty_plan(tmp_path):
    plot_plan([], plan([]), tmp_path / "empty.svg")
    ET.parse(tmp_path / "empty.svg")
