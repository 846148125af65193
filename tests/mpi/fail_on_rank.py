"""Under mpiexec: `fail_on_rank.py K` raises on rank K before a collective; `hang` leaves rank 0 waiting alone."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from irflow.runtime.communicator import Site
from irflow.runtime.mpi import join


def main(what: str) -> None:
    size = int(os.environ["PMI_SIZE"])
    comm = join((size,))
    a = np.ones(4, np.float32)
    if what == "hang":
        if comm.rank == 0:
            comm.all_reduce(a, a, 0, "sum", Site("job.all_reduce"))
        else:
            time.sleep(30)
        return
    if comm.rank == int(what):
        raise ValueError(f"bad input on rank {comm.rank}")
    comm.all_reduce(a, a, 0, "sum", Site("job.all_reduce"))


if __name__ == "__main__":
    main(sys.argv[1])
