"""Generated instances and the CSV reader (irflow/memplan/instances.py)."""

from irflow.memplan import Buffer, lower_bound
from irflow.memplan.instances import mixed, read_profile, tiled, training


def test_tiled_fills_the_rectangle():
    buffers = tiled(500, seed=4, height=1000)
    assert len(buffers) == 500
    assert sum(b.size * (b.last - b.first + 1) for b in buffers) == 1000 * 4 * 500
    assert lower_bound(buffers) == 1000  # every step fully loaded: LB = height = the optimum


def test_generators_are_seeded():
    for make in (tiled, training, mixed):
        assert make(200, seed=1) == make(200, seed=1) != make(200, seed=2)
        assert all(b.size >= 0 and b.first <= b.last for b in make(200))


def test_read_profile_makes_upper_inclusive(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size\nx,0,3,8\ny,3,4,16\n")
    assert read_profile(path) == [Buffer(8, 0, 2), Buffer(16, 3, 3)]
    assert lower_bound(read_profile(path)) == 16  # [0, 3) and [3, 4) do not meet
