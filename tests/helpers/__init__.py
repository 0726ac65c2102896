"""Code the tests share, none of it a test itself (pytest collects test_*.py only).

==========================  ==============================================================
``image_ref``               independent cv2/numpy replay of the native image path
``native_helpers``          the test-only native module fastq._native._testing, slot addresses
``fuzz_corpus``             mutated JPEG/PNG/WebP files for the decoder fuzz test
``dlpack_cases``            PyTorch and JAX DLPack cases (run by test_dlpack.py in its own
                            pytest process)
``tensorpack_scenarios``    tensorpack training scenarios (``python -m helpers.tensorpack_scenarios``)
``keras_strategy_scenario`` Keras + tf.distribute scenario (``python -m helpers.keras_strategy_scenario``)
``distribute_worker``       one MultiWorkerMirroredStrategy worker (``python -m helpers.distribute_worker``)
``plain_servers``           object servers fastq did not write, on 127.0.0.1: Python's http.server
                            (its defaults), nginx (for test_sources_remote_servers.py)
==========================  ==============================================================

Tests import them as ``from helpers import image_ref`` (pytest puts tests/ on
sys.path); the scenario scripts run as ``python -m helpers.X`` with tests/ on
PYTHONPATH.
"""
