"""Entry point for ``python -m kiln.bench``; see kiln.bench.runner."""
import sys

from kiln.bench.runner import main

if __name__ == "__main__":
    sys.exit(main())
