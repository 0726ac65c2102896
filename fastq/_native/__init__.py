"""fastq's compiled modules (as torchvision's ``_C``): ``_core`` (the slot ring, the
worker pool, error codes), ``_image`` (decode, ops, targets, readers: the image C API)
and ``_cuda`` (pinned host memory through a dlopen'ed CUDA runtime), built by setup.py
from the Cython sources here (``includes/`` holds one ``.pxd`` per C header of csrc/).
Private: the public API is ``fastq``, ``fastq.ops``, ``fastq.sources`` and the rest."""
