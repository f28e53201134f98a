"""The sizing model set: the configured real models at their real shapes with random weights.

Memory and time do not depend on the weights' values, so these answer "does it fit, and how long does it take"
on a real GPU without a download, a token or a rented pod. Every architecture comes from a file in
config/architectures/ (the components' config.json values, with their source); `build` makes the random
weights (on the device given: CUDA is much faster), saves them with `save_pretrained` (safetensors) at the
precision the real weights have on disk, and the run loads them through exactly the real loaders
(`fourloops.generate.load_backend`, `fourloops.keypoints.load_detector`, `fourloops.scorer.load_scorer`).

Not weights, and not downloadable here: the tokenizers and processors. They are built in memory: a byte-level
BPE trained on the run's own prompts and the pipelines' prompt templates (so a common English word is one token,
as with Qwen's real tokenizer; the counts are close to, not equal to, the real tokenizer's, and each probe
records its prompt token count), with the processors' real image settings. The vocabulary is a few hundred
entries instead of ~151 k: the embedding matrices keep their real size (the config's vocab_size), so the only
memory effect is the tokenizer's own few kB on the host. The special tokens take ids 0-6 and the configs'
token ids follow them (shapes are unchanged).

Plain Python: `build(component, out_dir, device)` is what rules/sizing.smk's script and bench/sizing_gpu.py call.
"""

from __future__ import annotations

import contextlib
import importlib
import time
import types
from pathlib import Path
from typing import Any

import yaml

from fourloops import io

ARCH_DIR = Path(__file__).resolve().parents[2] / "config" / "architectures"
MODEL_SET = "sizing"
# component -> the architecture files it is built from
COMPONENTS: dict[str, tuple[str, ...]] = {
    "omnigen2": ("omnigen2_transformer", "qwen2_5_vl_3b", "flux_vae"),
    "qwen_image_edit_plus": ("qwen_image_transformer", "qwen2_5_vl_7b", "qwen_image_vae"),
    "detector": ("rfdetr_keypoint_preview",),
    "scorer": ("qwen3_vl_8b", "editscore_adapter"),
}
DETECTOR_FILE = "rfdetr-keypoint.pth"
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>")
TOKEN_IDS = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
# Qwen's chat layout (string or list content) for the in-memory tokenizers; the real ones bring their own template.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
DEFAULT_TEXTS = ("The same person in the same pose, seen from a camera orbited to 45 degrees around them.",)
DTYPES = {"bf16": "bfloat16", "fp32": "float32", "fp16": "float16"}


class SizingError(ValueError):
    pass


# ------------------------------------------------------------------------------------ architectures
def architecture(name: str, arch_dir: str | Path | None = None) -> dict:
    path = Path(arch_dir or ARCH_DIR) / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in Path(arch_dir or ARCH_DIR).glob("*.yaml"))
        raise SizingError(f"architecture {name!r}: no file {path}; allowed: one of {known}")
    # libyaml where PyYAML has it: read at every parse (the rules' sizing inputs), 2-6 ms a file pure-Python
    data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    for key in ("source", "class", "build", "dtype_on_disk", "config"):
        if key not in data:
            raise SizingError(f"{path}: key {key!r} missing; every architecture names its source, class, build, "
                              "dtype_on_disk and config")
    if data["dtype_on_disk"] not in DTYPES:
        raise SizingError(f"{path}: dtype_on_disk = {data['dtype_on_disk']!r}; allowed: one of {list(DTYPES)}")
    return {**data, "name": name, "path": str(path), "sha256": io.sha256_file(path)}


def architectures(arch_dir: str | Path | None = None) -> list[str]:
    return sorted(p.stem for p in Path(arch_dir or ARCH_DIR).glob("*.yaml"))


def _class(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def import_omnigen2():
    """OmniGen2's transformer and pipeline classes. Its fused RMSNorm (triton) asks for a CUDA device at import;
    on a host without one the package's own fallback (torch.nn.RMSNorm, the same parameters) is selected."""
    import torch

    try:
        import omnigen2.utils.import_utils as og2_imports
    except ImportError as exc:
        raise ImportError(f"the OmniGen2 package (module `omnigen2`) cannot be imported: {exc}; put its source "
                          "(github VectorSpaceLab/OmniGen2 at the commit of fourloops.loading.OMNIGEN2_COMMIT) and "
                          "its requirements (einops, timm, omegaconf) on PYTHONPATH") from exc
    if not torch.cuda.is_available():
        og2_imports._triton_available = False
    from omnigen2.models.transformers.transformer_omnigen2 import OmniGen2Transformer2DModel
    from omnigen2.pipelines.omnigen2.pipeline_omnigen2 import OmniGen2Pipeline
    from omnigen2.schedulers.scheduling_flow_match_euler_discrete import FlowMatchEulerDiscreteScheduler

    return OmniGen2Pipeline, OmniGen2Transformer2DModel, FlowMatchEulerDiscreteScheduler


@contextlib.contextmanager
def _creating(device: str, dtype):
    """Modules made in here are made on `device` with `dtype` parameters (no fp32 copy first)."""
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(old)


def _with_token_ids(config: dict) -> dict:
    """The config with the in-memory tokenizer's special-token ids (shapes unchanged)."""
    ids = {"bos_token_id": TOKEN_IDS["<|endoftext|>"], "eos_token_id": TOKEN_IDS["<|im_end|>"],
           "pad_token_id": TOKEN_IDS["<|endoftext|>"]}
    out = dict(config)
    out["text_config"] = {**config.get("text_config", {}), **ids}
    out.update(ids, image_token_id=TOKEN_IDS["<|image_pad|>"], video_token_id=TOKEN_IDS["<|video_pad|>"],
               vision_start_token_id=TOKEN_IDS["<|vision_start|>"], vision_end_token_id=TOKEN_IDS["<|vision_end|>"])
    if "vision_token_id" in config:
        out["vision_token_id"] = TOKEN_IDS["<|image_pad|>"]
    return out


def instantiate(name: str, device: str = "meta", dtype: str | None = None, arch_dir: str | Path | None = None):
    """The module of architecture `name` with random weights on `device` ("meta": shapes only, no memory)."""
    import torch

    arch = architecture(name, arch_dir)
    torch_dtype = getattr(torch, DTYPES[dtype or arch["dtype_on_disk"]])
    build, cfg = arch["build"], dict(arch["config"])
    if build == "rfdetr":
        raise SizingError(f"architecture {name!r} is built by build('detector', ...) (RF-DETR builds on the CPU)")
    if build == "adapter":
        raise SizingError(f"architecture {name!r} is a LoRA adapter over another: build('scorer', ...) makes it")
    if arch["class"].startswith("omnigen2."):
        import_omnigen2()
    cls = _class(arch["class"])
    with _creating(device, torch_dtype):
        if build == "init":
            module = cls(**cfg)
        elif build == "from_config" and "config_class" in arch:
            config = _class(arch["config_class"])(**_with_token_ids(cfg))
            module = cls._from_config(config, dtype=torch_dtype)
        elif build == "from_config":
            module = cls.from_config(cfg)
        else:
            raise SizingError(f"{arch['path']}: build = {build!r}; allowed: init, from_config, rfdetr, adapter")
    if device != "meta":
        _randomise_zero_inits(module)
    return module.eval()


def _randomise_zero_inits(module) -> int:
    """Random values where the class's own init writes zeros (OmniGen2's adaLN modulation and output layers, as in
    DiT): a released model has trained them to non-zero values. Left at zero, the output would be constant, a LoRA's
    gradients zero (seen on a tiny OmniGen2: every lora_B stayed 0), and bf16 products faster than on real data
    (H200: 894 against 788 TFLOP/s, device KINDS.md). Returns how many tensors were filled."""
    import torch

    filled = 0
    with torch.no_grad():
        for p in module.parameters():
            if p.numel() > 1 and p.is_floating_point() and not bool(p.any()):
                p.normal_(0.0, 0.02)
                filled += 1
    return filled


def parameter_count(module) -> int:
    return int(sum(p.numel() for p in module.parameters()))


# ------------------------------------------------------------------------------------ tokenizers
def corpus(config: dict) -> list[str]:
    """The run's own prompts, the tokenizers' corpus (rules/sizing.smk's `texts`): every condition's prompt at every
    ladder azimuth, then every restyle instruction."""
    return ([c["prompt"].format(azimuth=a) for c in config["conditions"].values() for a in config["ladder"]["azimuths"]]
            + [str(v) for v in config["restyle"]["styles"].values()])


def omnigen2_prompts(texts) -> list[str]:
    """`texts` in OmniGen2's own system prompt and chat layout (rendered by its pipeline's own method)."""
    OmniGen2Pipeline, _, _ = import_omnigen2()
    plain = sized_tokenizer(list(texts))
    return [OmniGen2Pipeline._apply_chat_template(types.SimpleNamespace(processor=types.SimpleNamespace(
        tokenizer=plain)), t) for t in texts]


def qwen_image_prompts(texts) -> list[str]:
    """`texts` in Qwen-Image-Edit-Plus's own text template (read off a pipeline that needs no component for it)."""
    from diffusers import QwenImageEditPlusPipeline

    template = getattr(QwenImageEditPlusPipeline(scheduler=None, vae=None, text_encoder=None, tokenizer=None,
                                                 processor=None, transformer=None), "prompt_template_encode", "") or ""
    return [template.format(t) for t in texts] if "{}" in template else [template]


def sized_tokenizer(texts) -> Any:
    """A Qwen2 byte-level BPE tokenizer trained in memory on `texts` (special tokens at ids 0-6)."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=8192, special_tokens=list(SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([t for t in texts if t], trainer)
    model = json.loads(bpe.to_str())["model"]
    vocab = dict(model["vocab"])
    if any(vocab.get(t) != i for t, i in TOKEN_IDS.items()):
        raise AssertionError("the trained vocabulary does not start with the special tokens")
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model["merges"]]
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges, additional_special_tokens=list(SPECIAL_TOKENS[1:]),
                         unk_token=None, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.model_max_length = 131072
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _fits(tok, model, what: str) -> None:
    vocab = int(model.get_input_embeddings().num_embeddings)
    if len(tok) > vocab:
        raise SizingError(f"{what}: the in-memory tokenizer has {len(tok)} entries, the model's vocab_size is {vocab}; "
                          "allowed: at most vocab_size (train it on fewer texts or raise vocab_size)")


def _tokenizer_note(tok, texts) -> dict:
    return {"kind": "byte-level BPE trained in memory on the run's prompts and the pipeline's templates",
            "vocab_entries": len(tok), "trained_on_texts": len(texts),
            "note": "prompt token counts are close to, not equal to, the real tokenizer's (each probe records its "
                    "own); the embedding matrices keep their real vocab_size, so memory is unchanged"}


# ------------------------------------------------------------------------------------ builders
def _dir_bytes(root: Path) -> int:
    return int(sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file()))


def _sync(device: str) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _omnigen2(out: Path, device: str, texts: list[str], arch_dir) -> dict:
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    OmniGen2Pipeline, _, Scheduler = import_omnigen2()
    parts = {"transformer": instantiate("omnigen2_transformer", device, arch_dir=arch_dir),
             "mllm": instantiate("qwen2_5_vl_3b", device, arch_dir=arch_dir),
             "vae": instantiate("flux_vae", device, arch_dir=arch_dir)}
    rendered = omnigen2_prompts(texts)  # the pipeline's own system prompt and chat layout join the corpus
    tok = sized_tokenizer(list(texts) + rendered)
    _fits(tok, parts["mllm"], "omnigen2 mllm")
    processor = Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tok,
                                    video_processor=Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE)
    pipe = OmniGen2Pipeline(transformer=parts["transformer"], vae=parts["vae"], scheduler=Scheduler(),
                            mllm=parts["mllm"], processor=processor)
    _sync(device)
    t0 = time.perf_counter()
    pipe.save_pretrained(out, safe_serialization=True)
    return {"parts": parts, "save_seconds": time.perf_counter() - t0,
            "tokenizer": _tokenizer_note(tok, list(texts) + rendered)}


def _qwen_image_edit_plus(out: Path, device: str, texts: list[str], arch_dir) -> dict:
    import math

    from diffusers import FlowMatchEulerDiscreteScheduler, QwenImageEditPlusPipeline
    from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    parts = {"transformer": instantiate("qwen_image_transformer", device, arch_dir=arch_dir),
             "text_encoder": instantiate("qwen2_5_vl_7b", device, arch_dir=arch_dir),
             "vae": instantiate("qwen_image_vae", device, arch_dir=arch_dir)}
    # Qwen-Image-Edit-2509 scheduler/scheduler_config.json (values change neither memory nor time per step)
    scheduler = FlowMatchEulerDiscreteScheduler(
        base_image_seq_len=256, base_shift=math.log(3), max_image_seq_len=8192, max_shift=math.log(3), shift=1.0,
        shift_terminal=0.02, use_dynamic_shifting=True, time_shift_type="exponential")
    corpus = list(texts) + qwen_image_prompts(texts)
    tok = sized_tokenizer(corpus)
    _fits(tok, parts["text_encoder"], "qwen_image_edit_plus text_encoder")
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tok,
                                 video_processor=Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE)
    pipe = QwenImageEditPlusPipeline(scheduler=scheduler, vae=parts["vae"], text_encoder=parts["text_encoder"],
                                     tokenizer=tok, processor=processor, transformer=parts["transformer"])
    _sync(device)
    t0 = time.perf_counter()
    pipe.save_pretrained(out, safe_serialization=True)
    return {"parts": parts, "save_seconds": time.perf_counter() - t0, "tokenizer": _tokenizer_note(tok, corpus)}


def scorer_texts() -> tuple[list[str], str]:
    """EditScore's own prompts when the `editscore` package is here, else none (and why)."""
    try:
        from fourloops.grading import prompts

        return list(prompts(25)), "EditScore's SC and PQ prompts (score_range 25)"
    except ImportError as exc:
        return [], f"the editscore package is not importable here ({exc}): trained on the given texts only"


def scorer_processor(tok):
    """The scorer's processor around tokenizer `tok`: Qwen3-VL-8B-Instruct's image settings, Qwen's chat layout."""
    from transformers import Qwen2VLImageProcessor, Qwen3VLProcessor, Qwen3VLVideoProcessor

    # Qwen3-VL-8B-Instruct preprocessor_config.json: 16 px patches, 2x2 merge, mean/std 0.5
    images = Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2, image_mean=[0.5] * 3,
                                   image_std=[0.5] * 3, min_pixels=65536, max_pixels=16777216)
    return Qwen3VLProcessor(image_processor=images, tokenizer=tok, video_processor=Qwen3VLVideoProcessor(),
                            chat_template=CHAT_TEMPLATE)


def _scorer(out: Path, device: str, texts: list[str], arch_dir) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model

    base = instantiate("qwen3_vl_8b", device, arch_dir=arch_dir)
    base.generation_config.eos_token_id = TOKEN_IDS["<|im_end|>"]
    base.generation_config.pad_token_id = TOKEN_IDS["<|endoftext|>"]
    extra, where = scorer_texts()
    tok = sized_tokenizer(list(texts) + extra)
    _fits(tok, base, "scorer base")
    processor = scorer_processor(tok)
    adapter = architecture("editscore_adapter", arch_dir)
    _sync(device)
    t0 = time.perf_counter()
    base.save_pretrained(out / "base", safe_serialization=True)
    processor.save_pretrained(out / "base")
    with _creating(device, getattr(torch, DTYPES[adapter["dtype_on_disk"]])):
        lora = LoraConfig(**adapter["config"], init_lora_weights=False)  # random, so a skipped adapter would show
        peft_model = get_peft_model(base, lora)
    peft_model.save_pretrained(out / "adapter", safe_serialization=True)
    adapter_params = int(sum(p.numel() for n, p in peft_model.named_parameters() if "lora_" in n))
    return {"parts": {"base": base}, "adapter_parameters": adapter_params, "adapter_assumed": adapter["source"],
            "save_seconds": time.perf_counter() - t0, "tokenizer": {**_tokenizer_note(tok, texts + extra),
                                                                     "scorer_prompts": where}}


def _detector(out: Path, device: str, texts: list[str], arch_dir) -> dict:
    from fourloops.keypoints import _config_defaults, build_smoke_detector

    arch = architecture("rfdetr_keypoint_preview", arch_dir)
    defaults = _config_defaults()
    differ = {k: (v, defaults.get(k)) for k, v in arch["config"].items() if k != "num_classes" and defaults.get(k) != v}
    if differ:
        shown = "; ".join(f"{k}: file {a!r}, installed {b!r}" for k, (a, b) in differ.items())
        raise SizingError(f"{arch['path']}: the installed rfdetr's RFDETRKeypointPreview defaults differ ({shown}); "
                          "the file describes rfdetr 1.11.2: install that version or update the file with its source")
    info = build_smoke_detector(out / DETECTOR_FILE, seed=0, model_set=MODEL_SET)  # class defaults: the real shape
    return {"parts": {}, "parameters": {"model": info["parameter_count"]}, "save_seconds": info["build_seconds"],
            "classes": {"model": arch["class"]}}


_BUILDERS = {"omnigen2": _omnigen2, "qwen_image_edit_plus": _qwen_image_edit_plus, "detector": _detector,
             "scorer": _scorer}


def build(component: str, out_dir: str | Path, device: str = "cpu", *, seed: int = 0, texts=None,
          arch_dir: str | Path | None = None, builder=None) -> dict:
    """Build the sizing model of `component` into `out_dir` (random weights, fixed seed, on `device`).

    The directory is written beside its final place and renamed into it, so a killed build leaves no complete
    directory. Returns the record written to `out_dir/sizing.json`: classes, parameters, bytes on disk, seconds.
    `builder`: a stage's own (its GPU declaration's Build.builder), returning what ours return plus the names of
    its "architectures" in config/architectures/ (none: it reads none); None: ours for `component`."""
    import torch

    if builder is None and component not in COMPONENTS:
        raise SizingError(f"sizing component = {component!r}; allowed: one of {list(COMPONENTS)}")
    if not str(device) in ("cpu",) and not str(device).startswith("cuda"):
        raise SizingError(f"device = {device!r}; allowed: cpu, cuda or cuda:N")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise SizingError(f"device = {device!r}, but torch sees no CUDA device here; allowed here: cpu")
    texts = [str(t) for t in (texts or DEFAULT_TEXTS)]
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with io.atomic_dir(out) as tmp, torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        made = (builder or _BUILDERS[component])(Path(tmp), str(device), texts, arch_dir)
        parts = made.pop("parts")
        arch_names = tuple(made.pop("architectures", ())) if builder is not None else COMPONENTS[component]
        record = {
            "model_set": MODEL_SET, "component": component, "device": str(device), "seed": int(seed),
            "built_by": "fourloops.sizing.build",
            "classes": made.pop("classes", None) or {k: f"{type(m).__module__}.{type(m).__qualname__}"
                                                     for k, m in parts.items()},
            "parameters": made.pop("parameters", None) or {k: parameter_count(m) for k, m in parts.items()},
            "dtypes": {k: str(next(m.parameters()).dtype).replace("torch.", "") for k, m in parts.items()},
            "architectures": {n: {"source": (a := architecture(n, arch_dir))["source"], "sha256": a["sha256"]}
                              for n in arch_names},
            **made,
        }
        del parts
        if str(device).startswith("cuda"):
            torch.cuda.empty_cache()
        record["bytes_on_disk"] = _dir_bytes(Path(tmp))
        # the model directory holds no time: its bytes, and the revision digest the generator's records name, are
        # the same for every build of one seed and configuration; the seconds go to the job's record only
        io.write_json(Path(tmp) / "sizing.json", {k: v for k, v in record.items() if k != "save_seconds"})
    record["seconds"] = round(time.perf_counter() - t0, 2)
    record["save_seconds"] = round(record["save_seconds"], 2)
    return record


def model_path(component: str, root: str | Path) -> str:
    """Where the loaders find the built model of `component` under `root` (models/sizing)."""
    base = Path(root) / component
    if component == "detector":
        return str(base / DETECTOR_FILE)
    if component == "scorer":
        return str(base)  # base/ and adapter/ inside
    return str(base)
