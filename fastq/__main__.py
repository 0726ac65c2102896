"""``python -m fastq``: the fastq command (see fastq.cli)."""
import sys

from fastq.cli import main

sys.exit(main())
