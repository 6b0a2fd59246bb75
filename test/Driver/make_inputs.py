"""Writes the inputs of bundle.test: a good x and three wrong ones."""
import sys

import numpy as np

out = sys.argv[1]
np.save(f"{out}/x.npy", (np.arange(8, dtype=np.float32) - 3).reshape(2, 4))
np.save(f"{out}/x_i64.npy", np.arange(8, dtype=np.int64).reshape(2, 4))
np.save(f"{out}/x_wide.npy", np.zeros((2, 5), dtype=np.float32))
