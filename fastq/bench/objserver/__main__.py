"""python -m fastq.bench.objserver: serve a folder (see fastq.bench.objserver)."""
import sys

from fastq.bench.objserver._server import main

if __name__ == "__main__":
    sys.exit(main())
