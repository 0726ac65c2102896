# fastq/_native/includes: one extern-only .pxd per C header of csrc/ (as uvloop's includes/).
# This file only makes the folder a Cython package; nothing is built from it.
