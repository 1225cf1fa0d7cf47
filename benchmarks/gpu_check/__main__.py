"""``python -m benchmarks.gpu_check`` is ``python -m benchmarks gpu``."""

import sys

from benchmarks.gpu_check.run import main

sys.exit(main())
