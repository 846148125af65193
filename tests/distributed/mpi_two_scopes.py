"""The two-scope train job of test_placement.py, run as users run it: `mpiexec -n 4 python mpi_two_scopes.py ...`.

    python mpi_two_scopes.py FEATURES HEAD DATA_PARALLEL_HEAD OUT.npz

Writes the losses and the variables after training to OUT.npz (from rank 0).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from test_placement import train_steps

if __name__ == "__main__":
    features, head, data_parallel, out = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
    losses, variables, _ = train_steps(4, features, head, None, data_parallel)
    if os.environ.get("PMI_RANK", "0") == "0":
        np.savez(out, losses=np.array(losses), **{f"var:{k}": v for k, v in variables.items()})
