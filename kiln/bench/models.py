"""Model zoo for the kiln benchmark (``python -m kiln.bench``).

Every benchmark model is described by a :class:`ModelSpec`.  ``build_model``
turns a spec plus a :class:`BuildConfig` (device, dtype, batch, sequence
length) into ``(model, example_inputs)``: an ``nn.Module`` in eval mode on the
requested device/dtype and a tuple of positional inputs.  Building is
deterministic (fixed seed), so the warm-compile child process rebuilds exactly
the same model and inputs as the parent.

Groups:
  builtin       mlp, cnn, encoder             (plain torch.nn)
  transformers  bert, gpt2, llama, t5         (random weights from small configs,
                                               never downloads anything)
  torchvision   resnet18, resnet50            (only where torchvision imports)
  timm          vit_small                     (only where timm imports)

The default selection is builtin + transformers; ``all`` adds the optional
groups that are importable on this machine.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
from typing import Callable

import torch
from torch import nn

DEFAULT_GROUPS = ("builtin", "transformers")
SEED = 0


@dataclasses.dataclass(frozen=True)
class BuildConfig:
    """What to build: device, dtype and optional batch/seq overrides."""

    device: str = "cpu"
    dtype: torch.dtype = torch.float32
    batch: int | None = None
    seq: int | None = None


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One benchmark model.

    ``builder(batch, seq)`` returns ``(module, inputs)`` on CPU in float32;
    :func:`build_model` moves both to the requested device/dtype.
    ``batch``/``seq`` map a device kind ("cpu"/"cuda") to defaults; ``seq`` is
    None for models without a sequence dimension.
    """

    name: str
    group: str
    description: str
    builder: Callable[[int, int | None], tuple[nn.Module, tuple]]
    batch: dict
    seq: dict | None = None
    requires: str | None = None  # importable module needed, if any

    def available(self) -> bool:
        return self.requires is None or _importable(self.requires)

    def resolve_shape(self, cfg: BuildConfig) -> tuple[int, int | None]:
        """(batch, seq) for this device, honouring the overrides in cfg."""
        kind = "cuda" if str(cfg.device).startswith("cuda") else "cpu"
        batch = cfg.batch or self.batch[kind]
        seq = None if self.seq is None else (cfg.seq or self.seq[kind])
        return batch, seq


@functools.lru_cache(maxsize=None)
def _importable(module: str) -> bool:
    # torchvision can fail with errors other than ImportError (e.g. a
    # RuntimeError about missing operators), so catch everything.
    try:
        importlib.import_module(module)
        return True
    except Exception:
        return False


# --------------------------------------------------------------------------
# builtin models
# --------------------------------------------------------------------------
class MLP(nn.Module):
    """A stack of Linear+GELU layers followed by a Linear head."""

    def __init__(self, width: int = 1024, depth: int = 4):
        super().__init__()
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.GELU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, width)

    def forward(self, x):
        return self.head(self.body(x))


def _conv_block(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class SmallCNN(nn.Module):
    """Conv2d+BatchNorm2d+ReLU blocks, max/avg pooling and a Linear head."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            _conv_block(3, 32), _conv_block(32, 32), nn.MaxPool2d(2),
            _conv_block(32, 64), _conv_block(64, 64), nn.MaxPool2d(2),
            _conv_block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(128, num_classes)
        self._randomize_batchnorm()

    def _randomize_batchnorm(self):
        # Non-trivial running statistics, so BN folding mistakes show up as errors.
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.head(self.features(x))


def _build_mlp(batch, seq):
    return MLP(), (torch.randn(batch, 1024),)


def _build_cnn(batch, seq):
    return SmallCNN(), (torch.randn(batch, 3, 64, 64),)


def _gelu(x):
    return nn.functional.gelu(x)


def _build_encoder(batch, seq):
    # The activation is passed as a plain function: with the built-in
    # "relu"/"gelu" PyTorch's inference fast path runs the whole layer as one
    # opaque native op (torch._transformer_encoder_layer_fwd), leaving a
    # compiler nothing to optimize.  Same math, ordinary ops.
    layer = nn.TransformerEncoderLayer(
        d_model=256, nhead=4, dim_feedforward=1024, activation=_gelu, batch_first=True)
    return layer, (torch.randn(batch, seq, 256),)


# --------------------------------------------------------------------------
# transformers models (random weights, no downloads)
# --------------------------------------------------------------------------
class LastHiddenState(nn.Module):
    """Calls ``model(input_ids)`` and returns ``last_hidden_state``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids).last_hidden_state


def _hf_model(cls_name: str, config) -> nn.Module:
    import transformers

    # sdpa attention traces cleanly under torch.compile with transformers>=4.4x.
    config._attn_implementation = "sdpa"
    return LastHiddenState(getattr(transformers, cls_name)(config))


def _token_ids(batch: int, seq: int, vocab: int) -> tuple:
    return (torch.randint(0, vocab, (batch, seq)),)


def _build_bert(batch, seq, layers=4):
    from transformers import BertConfig

    cfg = BertConfig(hidden_size=256, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=1024)
    return _hf_model("BertModel", cfg), _token_ids(batch, seq, cfg.vocab_size)


def _build_gpt2(batch, seq):
    from transformers import GPT2Config

    cfg = GPT2Config(n_embd=256, n_layer=4, n_head=4, use_cache=False)
    return _hf_model("GPT2Model", cfg), _token_ids(batch, seq, cfg.vocab_size)


def _build_llama(batch, seq):
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                      num_attention_heads=8, num_key_value_heads=4, vocab_size=32000,
                      max_position_embeddings=2048, use_cache=False)
    return _hf_model("LlamaModel", cfg), _token_ids(batch, seq, cfg.vocab_size)


def _build_t5(batch, seq):
    from transformers import T5Config

    cfg = T5Config(d_model=256, d_kv=32, d_ff=1024, num_layers=4, num_heads=8,
                   use_cache=False)
    return _hf_model("T5EncoderModel", cfg), _token_ids(batch, seq, cfg.vocab_size)


# --------------------------------------------------------------------------
# optional vision models
# --------------------------------------------------------------------------
def _torchvision_builder(arch: str):
    def build(batch, seq):
        import torchvision

        return getattr(torchvision.models, arch)(weights=None), (torch.randn(batch, 3, 224, 224),)
    return build


def _build_vit_small(batch, seq):
    import timm

    model = timm.create_model("vit_small_patch16_224", pretrained=False)
    return model, (torch.randn(batch, 3, 224, 224),)


# --------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------
_HF_BATCH = {"cpu": 2, "cuda": 8}
_HF_SEQ = {"cpu": 128, "cuda": 512}
_IMG_BATCH = {"cpu": 8, "cuda": 64}

MODELS: dict[str, ModelSpec] = {s.name: s for s in [
    ModelSpec("mlp", "builtin", "4x(Linear 1024 + GELU) + Linear", _build_mlp,
              batch={"cpu": 64, "cuda": 512}),
    ModelSpec("cnn", "builtin", "Conv+BN+ReLU blocks, pooling, Linear; 3x64x64",
              _build_cnn, batch={"cpu": 8, "cuda": 64}),
    ModelSpec("encoder", "builtin", "nn.TransformerEncoderLayer d=256 h=4",
              _build_encoder, batch={"cpu": 8, "cuda": 32}, seq={"cpu": 128, "cuda": 256}),
    ModelSpec("bert", "transformers", "BertModel 4L h256", _build_bert,
              batch=_HF_BATCH, seq=_HF_SEQ, requires="transformers"),
    ModelSpec("gpt2", "transformers", "GPT2Model 4L h256", _build_gpt2,
              batch=_HF_BATCH, seq=_HF_SEQ, requires="transformers"),
    ModelSpec("llama", "transformers", "LlamaModel 4L h512 8 heads 4 kv", _build_llama,
              batch=_HF_BATCH, seq=_HF_SEQ, requires="transformers"),
    ModelSpec("t5", "transformers", "T5EncoderModel 4L d256", _build_t5,
              batch=_HF_BATCH, seq=_HF_SEQ, requires="transformers"),
    ModelSpec("resnet18", "torchvision", "torchvision resnet18, 3x224x224",
              _torchvision_builder("resnet18"), batch=_IMG_BATCH, requires="torchvision"),
    ModelSpec("resnet50", "torchvision", "torchvision resnet50, 3x224x224",
              _torchvision_builder("resnet50"), batch=_IMG_BATCH, requires="torchvision"),
    ModelSpec("mobilenet_v3", "torchvision", "torchvision mobilenet_v3_large, 3x224x224",
              _torchvision_builder("mobilenet_v3_large"), batch=_IMG_BATCH, requires="torchvision"),
    ModelSpec("efficientnet_b0", "torchvision", "torchvision efficientnet_b0, 3x224x224",
              _torchvision_builder("efficientnet_b0"), batch=_IMG_BATCH, requires="torchvision"),
    ModelSpec("vit_small", "timm", "timm vit_small_patch16_224", _build_vit_small,
              batch=_IMG_BATCH, requires="timm"),
]}


def select_models(selection: str | None) -> list[ModelSpec]:
    """Resolve a comma-separated selection into specs.

    Tokens may be model names, group names, ``default`` or ``all``.  Unknown
    names raise ValueError; known but unavailable models raise ValueError too
    (with the reason), so a typo never silently benchmarks nothing.
    """
    tokens = [t.strip() for t in (selection or "default").split(",") if t.strip()]
    chosen: list[ModelSpec] = []
    for token in tokens:
        for spec in _expand(token):
            if spec not in chosen:
                chosen.append(spec)
    return chosen


def _expand(token: str) -> list[ModelSpec]:
    if token == "all":
        return [s for s in MODELS.values() if s.available()]
    if token == "default":
        return [s for s in MODELS.values() if s.group in DEFAULT_GROUPS and s.available()]
    groups = {s.group for s in MODELS.values()}
    if token in groups:
        return [s for s in MODELS.values() if s.group == token and s.available()]
    spec = MODELS.get(token)
    if spec is None:
        raise ValueError(f"unknown model {token!r}; known: {', '.join(MODELS)}")
    if not spec.available():
        raise ValueError(f"model {token!r} needs {spec.requires!r}, which does not import here")
    return [spec]


def build_model(spec: ModelSpec, cfg: BuildConfig) -> tuple[nn.Module, tuple, dict]:
    """Build ``spec`` deterministically; returns (model, inputs, shape_info)."""
    batch, seq = spec.resolve_shape(cfg)
    torch.manual_seed(SEED)
    model, inputs = spec.builder(batch, seq)
    model = model.to(device=cfg.device, dtype=cfg.dtype).eval()
    inputs = tuple(_move_input(t, cfg) for t in inputs)
    return model, inputs, {"batch": batch, "seq": seq}


def _move_input(t, cfg: BuildConfig):
    if isinstance(t, torch.Tensor):
        dtype = cfg.dtype if t.is_floating_point() else t.dtype
        return t.to(device=cfg.device, dtype=dtype)
    return t


def describe_models() -> str:
    """Human-readable list of all models and their availability."""
    lines = []
    for s in MODELS.values():
        mark = "" if s.available() else f"  (unavailable: needs {s.requires})"
        default = " [default]" if s.group in DEFAULT_GROUPS else ""
        lines.append(f"  {s.name:<10} {s.group:<13} {s.description}{default}{mark}")
    return "\n".join(lines)
