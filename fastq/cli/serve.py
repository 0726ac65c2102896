"""``fastq serve-dispatcher`` / ``fastq serve-worker``: a tf.data service dispatcher or
worker with fastq's TensorFlow op loaded (the code is :mod:`fastq.tf.serve`, which imports
TensorFlow only when a command runs)."""
from fastq.tf import serve
from fastq.cli.base import arg, command

command("serve-dispatcher", help=serve.DISPATCHER_HELP, description=serve.DISPATCHER_HELP,
        args=[arg(*n, **k) for n, k in serve.DISPATCHER_ARGS])(serve.cmd_dispatcher)
command("serve-worker", help=serve.WORKER_HELP, description=serve.WORKER_HELP,
        args=[arg(*n, **k) for n, k in serve.WORKER_ARGS])(serve.cmd_worker)
