"""Model loading and input detection (cases from public bug reports)."""
import pytest
import torch
import torch.nn as nn

from conftest import TINY_GPT2, model_path
from vladbud import BridgeError
from vladbud.loader import load_model, make_inputs, model_depth, parse_input_shape, prepare, vocab_size


def test_gpt2_first_child_is_a_moduledict_and_inputs_are_token_ids():
    m = load_model(model_path("gpt2.py"), "GPT2", model_args=TINY_GPT2)
    first = next(iter(m.children()))
    assert isinstance(first, nn.ModuleDict)  # the case: detection must not stop at children()[0]
    x = make_inputs(m, 2, 16, "cpu")
    assert x.dtype == torch.int64 and x.shape == (2, 16)
    assert int(x.min()) >= 0 and int(x.max()) < 50257
    assert m(x).shape == (2, 16, 50257)


def test_vocab_from_the_embedding_when_no_attribute():
    class NoAttr(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleDict({"emb": nn.Embedding(777, 8)})

        def forward(self, x):
            return self.blocks["emb"](x)

    assert vocab_size(NoAttr()) == 777
    x = make_inputs(NoAttr(), 4, 64, "cpu")
    assert x.dtype == torch.int64 and int(x.max()) < 777


@pytest.mark.parametrize("file,cls,args,vocab", [
    ("bert.py", "Bert", {"n_layer": 1, "hidden": 64, "n_head": 4, "intermediate": 128}, 30522),
    ("gpt2.py", "GPT2", TINY_GPT2, 50257),
    ("llama.py", "Llama", {"n_layers": 1, "dim": 64, "n_heads": 4, "ffn_hidden": 128}, 32000),
])
def test_token_ids_stay_inside_each_vocabulary(file, cls, args, vocab):
    m = load_model(model_path(file), cls, model_args=args)
    assert vocab_size(m) == vocab
    x = make_inputs(m, 8, 512, "cpu", seed=3)
    assert int(x.min()) >= 0 and int(x.max()) < vocab
    assert int(x.max()) > vocab * 0.9  # the whole range is used, not a small default
    m(x[:, :64])  # an id >= vocab would raise IndexError in the embedding


def test_custom_template_example_inputs():
    m = load_model(model_path("custom_template.py"), "TinyClassifier", model_args='{"hidden": 32}')
    x = make_inputs(m, 3, 10, "cpu")
    assert m(x).shape == (3, 10)
    assert model_depth(m) == 2


def test_llama_configs():
    small = load_model(model_path("llama.py"), "Llama", model_args={"n_layers": 1})
    assert small.config["dim"] == 512 and small.vocab_size == 32000
    from importlib import util
    spec = util.spec_from_file_location("llama_cfg", model_path("llama.py"))
    mod = util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    c = mod.CONFIGS["7b"]
    assert (c["dim"], c["n_layers"], c["n_heads"], c["ffn_hidden"]) == (4096, 32, 32, 11008)
    with pytest.raises(ValueError, match="unknown LLaMA config"):
        mod.Llama(config="13x")


def test_bad_input_names_the_fix(tmp_path):
    with pytest.raises(BridgeError, match="does not exist.*--model"):
        load_model(str(tmp_path / "nope.py"), "GPT2")
    with pytest.raises(BridgeError, match="class 'GTP2' not found.*GPT2"):
        load_model(model_path("gpt2.py"), "GTP2")
    with pytest.raises(BridgeError, match="not valid JSON"):
        load_model(model_path("gpt2.py"), "GPT2", model_args="{n_layer: 2")
    with pytest.raises(BridgeError, match="cannot construct.*--model-args"):
        load_model(model_path("gpt2.py"), "GPT2", model_args={"n_layers": 2})
    for bad in ("128", "1,x", "0,4", "1,2,3", ""):
        with pytest.raises(BridgeError, match="BATCH,SEQ"):
            parse_input_shape(bad)
    assert parse_input_shape("2, 64") == (2, 64)
    m = load_model(model_path("gpt2.py"), "GPT2", model_args=TINY_GPT2)
    with pytest.raises(BridgeError, match="--dtype"):
        prepare(m, "fp8", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(BridgeError, match="no CUDA GPU"):
            prepare(m, "fp32", "cuda")


def test_transformers_path_explains_how_to_install():
    try:
        import transformers  # noqa: F401
    except ImportError:
        with pytest.raises(BridgeError, match="pip install transformers"):
            load_model(module="transformers", class_name="AutoModelForCausalLM", config="gpt2")
    else:
        pytest.skip("transformers is installed here; the missing-package message is not reachable")


def test_transformers_model_from_a_local_config_with_random_weights(tmp_path):
    pytest.importorskip("transformers", reason="transformers is optional (not in scripts/requirements.txt)")
    import json
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "gpt2", "n_layer": 1, "n_embd": 32, "n_head": 2,
                               "vocab_size": 1000, "n_positions": 64}))
    m = load_model(module="transformers", class_name="AutoModelForCausalLM", config=str(cfg))
    x = make_inputs(m, 2, 8, "cpu")
    assert int(x.max()) < 1000
    assert m(x).logits.shape == (2, 8, 1000)
