"""Translations of other libraries' input pipelines into fastq (docs/migrate.md).

* ``fastq.torch.translate`` / ``fastq.torch.DataLoader``: torchvision v1/v2 and timm
  transforms (``fastq.translate.torchvision``, ``fastq.translate.timm``);
* ``fastq.keras.translate`` / ``fastq.keras.image_dataset_from_directory``: Keras 3
  preprocessing layers (``fastq.translate.keras``);
* ``fastq.tensorpack.translate``: tensorpack ``imgaug`` augmentor lists
  (``fastq.translate.tensorpack``).

Each gives a :class:`Translation`: the native chain, the steps left to Python, and a
``pipeline()`` whose batches have the framework's dtype, layout, range and channel order.
"""
from fastq.translate._core import NotTranslatable, Step, Translation, TranslationError

__all__ = ["Translation", "Step", "TranslationError", "NotTranslatable"]
