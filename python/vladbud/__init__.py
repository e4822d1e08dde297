"""VladBud's PyTorch bridge (DESIGN §1): the parts that need PyTorch.

The C++ CLI runs ``python -m vladbud.profile`` / ``vladbud.verify`` / ``vladbud.baseline`` with a
JSON request file and reads a JSON result file back; users type ``vladbud <subcommand>``.
Modules: ``loader`` (models, inputs), ``trace`` (profiler events, counted once), ``classify``
(ops and kernel names -> the nine kernel types), ``kernels`` (kernel libraries through DLPack as
torch custom ops), ``replace`` (module/operator-level replacement), ``profile``, ``verify``,
``baseline``.
"""

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class BridgeError(Exception):
    """A user-facing error: bad input, with the fix in the message. Exit code 2."""
