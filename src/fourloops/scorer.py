"""The EditScore scorer: a Qwen3-VL base with the EditScore LoRA adapter, unmerged, and our own generation loop.

Loading is ours because the `editscore` package's loader has no 4-bit option: `transformers` loads the base
(NF4 through bitsandbytes on CUDA, or bf16 / fp32), `peft` puts the adapter over it without merging. The smoke
set's tiny pair goes through exactly this code. Weights come from a local directory or the Hugging Face cache
(`local_files_only`, never a download). `answer` times the prefill (vision encoder + prompt, up to the first
generated token) apart from the rest of the decoding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from fourloops.grading import Answer

PRECISIONS = ("nf4", "bf16", "fp32")
DECODINGS = ("greedy", "sample")
LOADS = 0  # calls of `load_scorer` in this process


class ScorerUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class ScorerSpec:
    base: str
    base_revision: str | None
    adapter: str
    adapter_revision: str | None
    precision: str
    device: str
    decoding: str = "greedy"
    temperature: float = 0.7
    max_new_tokens: int = 512

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ValueError(f"scorer precision = {self.precision!r}; allowed: one of {list(PRECISIONS)}")
        if self.decoding not in DECODINGS:
            raise ValueError(f"scorer decoding = {self.decoding!r}; allowed: one of {list(DECODINGS)}")
        if self.precision == "nf4" and not str(self.device).startswith("cuda"):
            raise ScorerUnavailable(f"scorer precision nf4 needs a CUDA device (bitsandbytes), device is {self.device!r}; "
                                    "allowed on this device: bf16 or fp32")


class _FirstToken:
    """A stopping criterion that never stops: it notes when the first new token exists (end of prefill)."""

    def __init__(self):
        self.at: float | None = None

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        if self.at is None:
            _sync()
            self.at = time.perf_counter()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def _sync():
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class EditScoreScorer:
    def __init__(self, model, processor, spec: ScorerSpec, description: dict):
        self.model, self.processor, self.spec, self._description = model, processor, spec, description

    def describe(self) -> dict:
        return dict(self._description)

    def _generate(self, inputs, kwargs: dict):
        """The model's `generate` on `inputs`, timed: (output ids, start, end of prefill, end)."""
        import torch
        from transformers import StoppingCriteriaList

        first = _FirstToken()
        _sync()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(**inputs, stopping_criteria=StoppingCriteriaList([first]), **kwargs)
        _sync()
        t1 = time.perf_counter()
        return out, t0, (first.at if first.at is not None else t1), t1

    def _chat(self, images: list, prompt: str) -> str:
        """The question as the model reads it: its images, then its text, in the processor's chat template."""
        content = [{"type": "image", "image": im} for im in images] + [{"type": "text", "text": prompt}]
        return self.processor.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                  add_generation_prompt=True)

    def answer(self, images: list, prompt: str, seed: int) -> Answer:
        import torch

        text = self._chat(images, prompt)
        inputs = self.processor(text=[text], images=list(images), return_tensors="pt").to(self.model.device)
        n_prompt = int(inputs["input_ids"].shape[1])
        sampling = self.spec.decoding == "sample"
        kwargs = {"do_sample": sampling, "max_new_tokens": int(self.spec.max_new_tokens)}
        if sampling:
            kwargs.update(temperature=float(self.spec.temperature), top_p=1.0, top_k=0)
        else:  # the model's generation_config may ask for sampling: greedy is greedy
            kwargs.update(temperature=None, top_p=None, top_k=None)
        torch.manual_seed(int(seed) % 2**63)  # seeded sampling is reproducible; greedy ignores it
        out, t0, first_at, t1 = self._generate(inputs, kwargs)
        new = out[0, n_prompt:]
        return Answer(
            text=self.processor.decode(new, skip_special_tokens=True),
            prompt_tokens=n_prompt,
            generated_tokens=int(new.shape[0]),
            encode_seconds=first_at - t0,
            decode_seconds=t1 - first_at,
        )

    def answer_many(self, items: list[tuple[list, str, int]]) -> list[Answer]:
        """One greedy `generate` over several (images, prompt, seed) questions, the prompts left-padded to the
        longest: an answer per item, in order, each row's text cut at the padded prompt's end. The call's prefill
        and decoding seconds are split evenly over its rows. Greedy only: sampled rows would share one random
        stream, so no row could keep its own seed (the config refuses grades.batch > 1 with sample decoding).
        A row's logits may differ in their last bits from a one-question call's (padding, batched kernels), so
        `answer` stays the one-question path."""
        import torch

        if not items:
            return []
        if self.spec.decoding != "greedy":
            raise ValueError(f"scorer decoding = {self.spec.decoding!r} with {len(items)} questions a call; allowed: "
                             "greedy (each sampled answer is seeded by its own call), or one question a call")
        texts = [self._chat(ims, prompt) for ims, prompt, _seed in items]
        images = [im for ims, _prompt, _seed in items for im in ims]
        inputs = self.processor(text=texts, images=images or None, return_tensors="pt", padding=True,
                                padding_side="left").to(self.model.device)
        width = int(inputs["input_ids"].shape[1])  # every row's prompt ends here (left padding)
        own = [int(n) for n in inputs["attention_mask"].sum(dim=1).tolist()]  # each row's prompt without its padding
        kwargs = {"do_sample": False, "max_new_tokens": int(self.spec.max_new_tokens),
                  "temperature": None, "top_p": None, "top_k": None}
        out, t0, first_at, t1 = self._generate(inputs, kwargs)
        share = 1.0 / len(items)
        ends = self.model.generation_config.eos_token_id
        ends = torch.tensor([] if ends is None else [ends] if isinstance(ends, int) else list(ends), device=out.device)
        answers = []
        for row, n_prompt in enumerate(own):
            new = out[row, width:]
            # a row that ended before the longest is padded after its end-of-answer token: up to that token, which
            # a one-question call's answer keeps too
            ended = torch.isin(new, ends).nonzero()
            new = new[:int(ended[0, 0]) + 1] if ended.numel() else new
            answers.append(Answer(
                text=self.processor.decode(new, skip_special_tokens=True),
                prompt_tokens=n_prompt,
                generated_tokens=int(new.shape[0]),
                encode_seconds=(first_at - t0) * share,
                decode_seconds=(t1 - first_at) * share,
            ))
        return answers


def _where(model: str, revision: str | None, what: str) -> tuple[Path, dict]:
    from fourloops.hub import GeneratorUnavailable, resolve_model

    try:
        return resolve_model(model, revision)
    except GeneratorUnavailable as err:
        raise ScorerUnavailable(f"scorer {what}: {err}") from err


def _revision(path: Path, source: dict) -> tuple[str, str]:
    from fourloops.hub import local_dir_digest

    if source["source"] in ("hub_cache", "hub_download"):
        return source["resolved_revision"], "hub_commit"
    return local_dir_digest(path), "local_dir_sha256"


def load_scorer(spec: ScorerSpec) -> EditScoreScorer:
    """The base at `spec.precision` on `spec.device`, the adapter over it unmerged, and its processor."""
    global LOADS
    import torch
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText, AutoProcessor

    base_path, base_src = _where(spec.base, spec.base_revision, "base")
    adapter_path, adapter_src = _where(spec.adapter, spec.adapter_revision, "adapter")
    kwargs: dict = {"local_files_only": True}
    if spec.precision == "nf4":
        from transformers import BitsAndBytesConfig

        kwargs.update(quantization_config=BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16),
            dtype=torch.bfloat16, device_map={"": spec.device})
    else:
        kwargs.update(dtype=torch.bfloat16 if spec.precision == "bf16" else torch.float32)
    base = AutoModelForImageTextToText.from_pretrained(base_path, **kwargs)
    if spec.precision != "nf4":
        base = base.to(spec.device)
    model = PeftModel.from_pretrained(base, adapter_path, is_trainable=False).eval()  # unmerged: LoRA layers stay
    processor = AutoProcessor.from_pretrained(base_path, local_files_only=True)
    LOADS += 1
    base_rev, base_kind = _revision(base_path, base_src)
    adapter_rev, adapter_kind = _revision(adapter_path, adapter_src)
    import peft
    import transformers

    description = {
        "role": "scorer",
        "model": spec.base, "revision": base_rev, "revision_kind": base_kind, "model_source": base_src["source"],
        "adapter": spec.adapter, "adapter_revision": adapter_rev, "adapter_revision_kind": adapter_kind,
        "adapter_merged": False,
        "precision": spec.precision, "device": spec.device,
        "decoding": spec.decoding, "temperature": spec.temperature if spec.decoding == "sample" else None,
        "max_new_tokens": spec.max_new_tokens,
        "model_class": f"{type(base).__module__}.{type(base).__qualname__}",
        "parameters": int(sum(p.numel() for p in base.parameters())),
        "torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__,
    }
    return EditScoreScorer(model, processor, spec, description)
