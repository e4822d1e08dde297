"""Loading a model (file + class, importable module + class, or HF transformers from a config)
and making its inputs."""
import importlib
import importlib.util
import json
import os
import sys

import torch
import torch.nn as nn

from . import DTYPES, BridgeError


def torch_dtype(name: str) -> torch.dtype:
    """'fp32' | 'fp16' | 'bf16' -> torch dtype; BridgeError otherwise."""
    if name not in DTYPES:
        raise BridgeError(f"--dtype must be one of fp32, fp16, bf16 (got '{name}')")
    return getattr(torch, DTYPES[name])


def parse_input_shape(text: str):
    """'B,S' -> (B, S), both positive ints; BridgeError naming the fix otherwise."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        dims = []
    if len(dims) != 2 or any(d <= 0 for d in dims):
        raise BridgeError(f"--input-shape must be 'BATCH,SEQ' with two positive integers, e.g. 1,128 "
                          f"(got '{text}')")
    return tuple(dims)


def _load_class_from_file(path: str, class_name: str):
    if not os.path.isfile(path):
        raise BridgeError(f"model file '{path}' does not exist; pass --model PATH/TO/model.py "
                          f"(the bundled models are in models/: gpt2.py, llama.py, bert.py)")
    name = "vladbud_user_model_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise BridgeError(f"model file '{path}' is not a Python source file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return _get_class(mod, class_name, path)


def _get_class(mod, class_name, where):
    cls = getattr(mod, class_name, None)
    if cls is None or not isinstance(cls, type):
        found = sorted(n for n, v in vars(mod).items()
                       if isinstance(v, type) and issubclass(v, nn.Module) and v.__module__ == mod.__name__)
        raise BridgeError(f"class '{class_name}' not found in {where}; nn.Module classes defined there: "
                          f"{', '.join(found) or 'none'} (pass one with --class-name)")
    return cls


def _load_transformers(class_name: str, config: str, model_args: dict):
    try:
        transformers = importlib.import_module("transformers")
    except ImportError:
        raise BridgeError(f"the transformers package is not installed in {sys.executable}; install it "
                          f"with '{sys.executable} -m pip install transformers' (it is optional: the "
                          f"bundled models in models/ need nothing but torch)") from None
    if not config:
        raise BridgeError("--module transformers needs --config NAME_OR_PATH (a config.json, a folder "
                          "holding one, or a model name already in the local Hugging Face cache)")
    cls = getattr(transformers, class_name, None)
    if cls is None:
        raise BridgeError(f"transformers has no class '{class_name}' (e.g. AutoModelForCausalLM)")
    try:
        if os.path.isfile(config):
            with open(config) as f:
                d = json.load(f)
            if "model_type" not in d:
                raise BridgeError(f"{config} has no 'model_type' (e.g. \"gpt2\", \"llama\")")
            cfg = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
        else:
            cfg = transformers.AutoConfig.from_pretrained(config, local_files_only=True)
    except BridgeError:
        raise
    except Exception as e:  # noqa: BLE001 - transformers raises many kinds
        raise BridgeError(f"cannot read the transformers config '{config}' ({e}); pass a local "
                          f"config.json or folder (there is no network)") from None
    for k, v in model_args.items():
        setattr(cfg, k, v)
    # Random weights from the config: no weights are downloaded.
    return cls.from_config(cfg) if hasattr(cls, "from_config") else cls(cfg)


def load_model(model: str = "", class_name: str = "", module: str = "", config: str = "",
               model_args=None) -> nn.Module:
    """Builds the model in eval mode, fp32, on the CPU.

    model: path of a .py file defining `class_name`; or module: an importable module name
    ('transformers' builds `class_name`.from_config(config) with random weights).
    model_args: dict (or JSON text) of constructor keyword arguments.
    Raises BridgeError for a missing file, unknown class, bad JSON or missing transformers."""
    if isinstance(model_args, str):
        try:
            model_args = json.loads(model_args) if model_args.strip() else {}
        except json.JSONDecodeError as e:
            raise BridgeError(f"--model-args is not valid JSON ({e}); pass an object, e.g. "
                              f"'{{\"n_layer\": 2}}'") from None
    model_args = model_args or {}
    if not isinstance(model_args, dict):
        raise BridgeError("--model-args must be a JSON object of constructor keyword arguments")
    if not class_name:
        raise BridgeError("--class-name is required (the nn.Module class to build)")
    if module == "transformers":
        m = _load_transformers(class_name, config, model_args)
    else:
        if module:
            try:
                mod = importlib.import_module(module)
            except ImportError as e:
                raise BridgeError(f"cannot import module '{module}' ({e})") from None
            cls = _get_class(mod, class_name, f"module {module}")
        elif model:
            cls = _load_class_from_file(model, class_name)
        else:
            raise BridgeError("pass --model FILE.py (or --module NAME) and --class-name")
        try:
            m = cls(**model_args)
        except TypeError as e:
            raise BridgeError(f"cannot construct {class_name}(**{model_args}): {e}; check --model-args") from None
    if not isinstance(m, nn.Module):
        raise BridgeError(f"{class_name} is not a torch.nn.Module")
    return m.eval()


def vocab_size(model: nn.Module):
    """The token vocabulary: model.vocab_size, model.config.vocab_size, else the first
    nn.Embedding anywhere in the module tree (modules(), depth first: a ModuleDict first child,
    as GPT-2's `transformer`, is walked into, not mistaken for the input layer). None if none."""
    for obj in (model, getattr(model, "config", None)):
        v = getattr(obj, "vocab_size", None) if obj is not None else None
        if isinstance(v, int) and v > 0:
            return v
    for m in model.modules():
        if isinstance(m, nn.Embedding):
            return m.num_embeddings
    return None


def model_depth(model: nn.Module) -> int:
    """Number of repeated blocks (n_layer / n_layers / config.num_hidden_layers, else the longest
    ModuleList), at least 1. Used for verify's tolerance."""
    for obj in (model, getattr(model, "config", None)):
        for attr in ("n_layer", "n_layers", "num_hidden_layers"):
            v = getattr(obj, attr, None) if obj is not None else None
            if isinstance(v, int) and v > 0:
                return v
    lists = [len(m) for m in model.modules() if isinstance(m, nn.ModuleList)]
    return max(lists + [1])


def make_inputs(model: nn.Module, batch: int, seq: int, device, seed: int = 0) -> torch.Tensor:
    """The input of forward(): see models/custom_template.py for the order of detection.
    Token ids are drawn uniformly from [0, vocab) with a seeded generator, so they stay inside
    the model's own vocabulary (BERT: 30522, GPT-2: 50257, LLaMA: 32000)."""
    ex = getattr(model, "example_inputs", None)
    if callable(ex):
        return ex(batch, seq, device=device)
    g = torch.Generator().manual_seed(seed)
    v = vocab_size(model)
    if v is not None:
        return torch.randint(0, v, (batch, seq), generator=g, dtype=torch.int64).to(device)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            p = next(model.parameters())
            return torch.randn(batch, seq, m.in_features, generator=g).to(device=device, dtype=p.dtype)
    raise BridgeError(f"cannot tell what {type(model).__name__}.forward takes (no embedding, no "
                      f"linear layer); define example_inputs(batch, seq, device) on the model "
                      f"(see models/custom_template.py)")


def prepare(model: nn.Module, dtype: str, device: str) -> nn.Module:
    """Casts to the dtype and moves to the device; BridgeError if CUDA is asked for and absent."""
    if device not in ("cpu", "cuda"):
        raise BridgeError(f"--device must be cpu or cuda (got '{device}')")
    if device == "cuda" and not torch.cuda.is_available():
        raise BridgeError("--device cuda: torch sees no CUDA GPU here (torch "
                          f"{torch.__version__}); use --device cpu")
    return model.to(device=device, dtype=torch_dtype(dtype))


def read_request(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def load_from_request(req: dict) -> nn.Module:
    """load_model + prepare from the request fields the CLI writes."""
    m = load_model(req.get("model", ""), req.get("class_name", ""), req.get("module", ""),
                   req.get("config", ""), req.get("model_args") or {})
    return prepare(m, req.get("dtype", "fp32"), req.get("device", "cpu"))


def main_wrapper(fn):
    """Runs fn(argv) turning BridgeError into 'error: ...' on stderr and exit code 2."""
    try:
        fn(sys.argv[1:])
    except BridgeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
